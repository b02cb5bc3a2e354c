/* A fork server for a real program, preloaded into it (LD_PRELOAD): the
 * program and its libraries load and run their static initialisers once
 * (libtorch's take most of a benchmark program's start, about 0.6 s of CPU),
 * then every command line the caller sends runs in a child forked from that
 * state, before main: a fresh process of the real program from main on, with
 * its own exit status, stdout and stderr. The server itself never runs main,
 * so a case that crashes, exits or changes the process's state leaves the next
 * case nothing: each child starts from the same untouched copy.
 *
 * tests/python/test_fake_matches_programs.py asks the benchmark programs for
 * about 90 descriptions this way (fork_server.py is its client).
 *
 * Without THREADBURN_FORK_SERVER in the environment the program runs as usual.
 * With THREADBURN_FORK_SERVER=R,W (two inherited pipe descriptors):
 *   - before serving, the server removes THREADBURN_FORK_SERVER and LD_PRELOAD
 *     from its environment, so each child sees the caller's environment less
 *     those two (a program that reports LD_PRELOAD reports it unset);
 *   - a request on R: NUL-terminated fields: the number of arguments N
 *     (decimal), the N arguments after argv[0], the stdout path, the stderr path;
 *   - the child: stdin /dev/null, stdout and stderr those files (created or
 *     truncated), R and W closed, argv[0] the server's own, then
 *     exit(main(N + 1, argv, environ)), as the C library's start does, but
 *     with the C library's streams flushed and no exit handlers (see exit);
 *   - the reply on W: the child's wait status (waitpid) in decimal and "\n";
 *   - at the end of R the server exits 0.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

typedef int (*main_fn)(int, char**, char**);
typedef int (*start_fn)(main_fn, int, char**, void (*)(void), void (*)(void), void (*)(void), void*);

extern char** environ;

static main_fn real_main;
static int in_child;

/* A case's end: exit (from main's return or the program's own call) flushes
 * the C library's streams (C++'s standard streams write through them) and
 * ends the child without the exit handlers and static destructors. Those of
 * libtorch rewrite its operator tables at exit: in a forked child every page
 * they touch is copied first (copy-on-write), about 1 s of CPU and 2-3 s of
 * wall time a case here, against about 40 ms of CPU for a whole --describe
 * case without them (a start afresh: about 0.9 s).
 * They print nothing and decide no exit status; a program whose output came
 * from an exit handler would differ here from a fresh start, which the test
 * compares with for some cases. */
void exit(int code) {
  if (in_child) {
    fflush(NULL);
    _exit(code);
  }
  void (*real_exit)(int);
  *(void**)&real_exit = dlsym(RTLD_NEXT, "exit");  /* POSIX's way round ISO C's rule on pointer casts */
  if (real_exit) real_exit(code);
  _exit(code);
}

/* The threads of this process (/proc/self/task): a fork copies only the
 * calling one, so the server serves only while it is alone. */
static int threads(void) {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return -1;
  int n = 0;
  for (struct dirent* e; (e = readdir(dir));)
    if (e->d_name[0] != '.') n++;
  closedir(dir);
  return n;
}

static void die(const char* what) {
  fprintf(stderr, "fork_server: %s\n", what);
  _exit(125);
}

/* The next NUL-terminated field of in (malloc'd), or NULL at the end of input. */
static char* field(FILE* in) {
  char* line = NULL;
  size_t size = 0;
  ssize_t n = getdelim(&line, &size, '\0', in);
  if (n <= 0) {
    free(line);
    return NULL;
  }
  if (line[n - 1] != '\0') die("a request's last field has no NUL");
  return line;
}

static void redirect(const char* path, int fd, int flags) {
  int opened = open(path, flags, 0644);
  if (opened < 0 || dup2(opened, fd) < 0) die("cannot open a case's stdin, stdout or stderr");
  if (opened != fd) close(opened);
}

static int serve(int argc, char** argv, const char* spec) {
  int rfd = -1, wfd = -1;
  if (sscanf(spec, "%d,%d", &rfd, &wfd) != 2 || rfd < 0 || wfd < 0) die("THREADBURN_FORK_SERVER is not R,W");
  unsetenv("THREADBURN_FORK_SERVER");
  unsetenv("LD_PRELOAD");
  if (threads() != 1) die("the program has more than one thread before main: its children would lack them");
  FILE* in = fdopen(rfd, "r");
  if (!in) die("cannot read the requests");
  (void)argc;
  for (;;) {
    char* count = field(in);
    if (!count) break;
    char* end = NULL;
    long n = strtol(count, &end, 10);
    if (*end || n < 0 || n > 4096) die("a request's argument count is not a number");
    free(count);
    char** args = calloc((size_t)n + 2, sizeof(char*));
    if (!args) die("out of memory");
    args[0] = argv[0];
    for (long i = 1; i <= n; i++)
      if (!(args[i] = field(in))) die("a request ended early");
    char* out = field(in);
    char* err = out ? field(in) : NULL;
    if (!err) die("a request ended early");
    /* Not flushed here: what a static initialiser left in stdout's buffer is
     * each child's, as it would be a fresh process's. */
    pid_t pid = fork();
    if (pid < 0) die("fork failed");
    if (pid == 0) {
      in_child = 1;
      close(rfd);
      close(wfd);
      redirect("/dev/null", 0, O_RDONLY);
      redirect(out, 1, O_WRONLY | O_CREAT | O_TRUNC);
      redirect(err, 2, O_WRONLY | O_CREAT | O_TRUNC);
      exit(real_main((int)n + 1, args, environ));
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0)
      if (errno != EINTR) die("waitpid failed");
    for (long i = 1; i <= n; i++) free(args[i]);
    free(args);
    free(out);
    free(err);
    char reply[32];
    int len = snprintf(reply, sizeof reply, "%d\n", status);
    if (write(wfd, reply, (size_t)len) != len) die("cannot reply");
  }
  _exit(0);  /* the server ran no main: nothing of the program's to finish */
}

static int main_or_serve(int argc, char** argv, char** envp) {
  const char* spec = getenv("THREADBURN_FORK_SERVER");
  if (!spec) return real_main(argc, argv, envp);
  return serve(argc, argv, spec);
}

int __libc_start_main(main_fn main, int argc, char** argv, void (*init)(void), void (*fini)(void),
                      void (*rtld_fini)(void), void* stack_end) {
  start_fn real_start;
  *(void**)&real_start = dlsym(RTLD_NEXT, "__libc_start_main");
  if (!real_start) die("no __libc_start_main");
  real_main = main;
  return real_start(main_or_serve, argc, argv, init, fini, rtld_fini, stack_end);
}
