#include "monitor/launch.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/procfs.h"

namespace threadburn::monitor {

volatile sig_atomic_t g_signals = 0;
volatile sig_atomic_t g_last_signal = 0;
volatile sig_atomic_t g_from_terminal = 0;

namespace {

void on_signal(int sig, siginfo_t* info, void*) {
  g_last_signal = sig;
  // SI_KERNEL: the terminal sent it to the whole foreground group, so a
  // launched child got it too and must not get it a second time from us.
  g_from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  g_signals = g_signals + 1;
}

}  // namespace

void install_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  // No SA_RESTART: waitpid sees EINTR. The sampling sleep restarts (core's
  // sleep_until_ns), so a stop request waits at most one period.
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

Launch::Launch(char** argv) {
  int gate[2], err[2];
  if (::pipe2(gate, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || (pid_ = ::fork()) < 0) {
    throw Error(std::string("cannot start '") + argv[0] + "': " + std::strerror(errno));
  }
  if (pid_ == 0) {
    ::close(gate[1]);
    ::close(err[0]);
    char c;
    while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
    }
    ::execvp(argv[0], argv);
    const int e = errno;
    (void)!::write(err[1], &e, sizeof e);
    ::_exit(127);
  }
  ::close(gate[0]);
  ::close(err[1]);
  gate_fd_ = gate[1];
  err_fd_ = err[0];
}

int Launch::release() {
  ::close(gate_fd_);  // EOF on the gate: the child execs now
  int err = 0;
  ssize_t n;
  while ((n = ::read(err_fd_, &err, sizeof err)) < 0 && errno == EINTR) {
  }
  ::close(err_fd_);
  if (n != static_cast<ssize_t>(sizeof err)) return 0;
  ::waitpid(pid_, nullptr, 0);
  return err;
}

bool launched_child_exited(pid_t pid) {
  siginfo_t si{};  // WNOWAIT: the zombie stays readable for the last sample
  return ::waitid(P_PID, static_cast<id_t>(pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid;
}

bool attached_process_ended(pid_t pid) {
  const char state = process_state(pid);
  return state == '\0' || state == 'Z' || state == 'X';
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string status_text(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "exit code " + std::to_string(exit_code_of(status));
}

}  // namespace threadburn::monitor
