// The process the monitor watches: a command it launches (held at a gate
// until the monitor has read its baseline), its exit status, and the signals
// that stop a recording.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <string>

namespace threadburn::monitor {

// Stop requests received (SIGINT, SIGTERM, SIGHUP), the last one, and whether
// it came from the terminal (then a launched child got it too).
extern volatile sig_atomic_t g_signals;
extern volatile sig_atomic_t g_last_signal;
extern volatile sig_atomic_t g_from_terminal;
void install_handlers();

// CMD forked and held at a gate, so the monitor reads its baseline before CMD
// runs anything; exec errors come back through a close-on-exec pipe. Throws
// Error when it cannot fork.
class Launch {
 public:
  explicit Launch(char** argv);
  pid_t pid() const { return pid_; }
  // Opens the gate; returns 0, or the errno of a failed exec (CMD reaped).
  int release();

 private:
  pid_t pid_ = -1;
  int gate_fd_ = -1, err_fd_ = -1;
};

// Whether a launched child has exited (it stays a zombie, readable, until waited for).
bool launched_child_exited(pid_t pid);
// Whether an attached process has ended (gone, or a zombie: its leader stays
// listed until reaped).
bool attached_process_ended(pid_t pid);
int exit_code_of(int status);
std::string status_text(int status);

}  // namespace threadburn::monitor
