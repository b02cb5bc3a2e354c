# cpack -G DEB (in the build dir): threadburn_<version>_amd64.deb, the same
# install rules under /usr (/usr/bin/threadburn, /usr/libexec/threadburn,
# /usr/share/threadburn, /usr/share/doc/threadburn). README.md, "Install the
# .deb"; tested by tests/install (label install).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME threadburn)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "threadburn developers <threadburn@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "CPU burned by OpenMP worker threads around training steps, and which thread settings to use")
set(CPACK_PACKAGE_DESCRIPTION
  "threadburn runs your program (or libtorch workloads) under a preload probe and
races thread settings (OMP_NUM_THREADS, KMP_BLOCKTIME, OMP_WAIT_POLICY, the
OpenMP runtime) to a verdict: change, keep or undecided.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# BSD-3-Clause; the .deb carries it as /usr/share/doc/threadburn/copyright (the install rules).
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)   # threadburn_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# The libraries the programs link (libtorch, oneDNN, TBB, Google Benchmark,
# libgomp, libstdc++ ...): dpkg-shlibdeps reads them off the ELF files, with
# the versions their packages' shlibs files require, so the list cannot drift
# from what the build linked. cmake/deb_depends.cmake runs it, as CPack's
# CPACK_DEBIAN_PACKAGE_SHLIBDEPS would, but with one `file` for all the package's files
# where CPack starts a cmake and a `file` for each (511: 45 s of CPU, most of cpack's).
set(CPACK_PRE_BUILD_SCRIPTS ${PROJECT_SOURCE_DIR}/cmake/deb_depends.cmake)
# What dpkg-shlibdeps cannot see: the command is Python (Debian's
# /usr/bin/python3) whose decision rule takes its distributions from
# scipy.stats (python3-scipy, which brings numpy).
set(CPACK_DEBIAN_PACKAGE_DEPENDS "python3, python3-scipy")
# LLVM's OpenMP runtime for the runtime axis (--runtime llvm, preloaded, not
# linked: paths.LIBOMP), numpy and matplotlib for the plots.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libomp5-14, python3-numpy, python3-matplotlib")
# Optional subjects and launchers: Python trainings, mpirun ranks, Slurm.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, openmpi-bin, slurm-wlm")
# A build against a CUDA toolkit links libcudart, which no Debian package
# provides when the toolkit came from NVIDIA's installer: dpkg-shlibdeps
# cannot name it, and the package then runs only where that toolkit is.
if(THREADBURN_WITH_CUDA AND CUDAToolkit_FOUND)
  message(STATUS "threadburn: the .deb (cpack -G DEB) will need CUDA ${CUDAToolkit_VERSION}'s libcudart; "
                 "for CPU hosts configure with -DTHREADBURN_WITH_CUDA=OFF")
endif()
# dpkg-deb's own default compression: a quarter smaller than gzip here (the
# PNGs of results/ barely compress), a few seconds more to build.
set(CPACK_DEBIAN_COMPRESSION_TYPE xz)
include(CPack)
