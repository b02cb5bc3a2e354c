# cpack -G DEB, run by CPack after it installed the package's files and before it makes the
# package (CPACK_PRE_BUILD_SCRIPTS, cmake/package.cmake): the Depends of the libraries the
# package's ELF files link, read by dpkg-shlibdeps as CPack's own
# CPACK_DEBIAN_PACKAGE_SHLIBDEPS does (every file's type by `file`, the dynamically linked
# ELF ones to dpkg-shlibdeps --ignore-missing-info, its Depends after the declared
# ones), but with one `file` for all the files: CPack starts a cmake and a `file` for each
# (511 files here, the results' figures and tables among them: 45 s of CPU, most of cpack's).
cmake_policy(PUSH)
cmake_policy(SET CMP0009 NEW)  # GLOB_RECURSE follows no link (the docs link: no ELF file)
set(_root "${CPACK_TEMPORARY_DIRECTORY}")
file(GLOB_RECURSE _files LIST_DIRECTORIES false RELATIVE "${_root}" "${_root}/*")
list(TRANSFORM _files PREPEND "./")
execute_process(COMMAND env LC_ALL=C file -N -F "\t" ${_files} WORKING_DIRECTORY "${_root}"
                OUTPUT_VARIABLE _types RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "deb_depends.cmake: file exited ${_rc}")
endif()
string(REPLACE "\n" ";" _types "${_types}")
set(_elf "")
foreach(_line IN LISTS _types)
  if(_line MATCHES "^([^\t]*)\t.*ELF.*dynamically linked")
    list(APPEND _elf "${CMAKE_MATCH_1}")
  endif()
endforeach()
if(_elf)
  # dpkg-shlibdeps reads the package's name from debian/control (empty here), as under CPack.
  file(WRITE "${_root}/debian/control" "")
  execute_process(COMMAND env LC_ALL=C dpkg-shlibdeps --ignore-missing-info -O ${_elf} WORKING_DIRECTORY "${_root}"
                  OUTPUT_VARIABLE _out ERROR_VARIABLE _err RESULT_VARIABLE _rc)
  file(REMOVE_RECURSE "${_root}/debian")
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "deb_depends.cmake: dpkg-shlibdeps exited ${_rc}: ${_err}")
  endif()
  if(_out MATCHES "shlibs:Depends=([^\n]*)")
    string(STRIP "${CMAKE_MATCH_1}" _auto)
    if(CPACK_DEBIAN_PACKAGE_DEPENDS)
      set(CPACK_DEBIAN_PACKAGE_DEPENDS "${CPACK_DEBIAN_PACKAGE_DEPENDS}, ${_auto}")
    else()
      set(CPACK_DEBIAN_PACKAGE_DEPENDS "${_auto}")
    endif()
  endif()
  message(STATUS "deb_depends.cmake: Depends: ${CPACK_DEBIAN_PACKAGE_DEPENDS}")
endif()
cmake_policy(POP)
