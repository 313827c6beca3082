//===- Launcher.cpp - Runs the local ranks of one job ---------------------===//
#include "runner/Launcher.h"
#include "runner/ErrorFile.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace fsdp {
namespace driver {

namespace {

using Clock = std::chrono::steady_clock;

std::string errnoText(int err) { return std::strerror(err); }

/// The last SIGINT/SIGTERM received, for the wait loop to forward, and
/// whether the kernel sent it (Ctrl-C on the terminal): the ranks are in the
/// launcher's process group and got that one themselves already.
volatile std::sig_atomic_t pendingSignal = 0;
volatile std::sig_atomic_t pendingFromKernel = 0;
void onSignal(int sig, siginfo_t *info, void *) {
  pendingFromKernel = info && info->si_code > 0;
  pendingSignal = sig;
}

/// Catches SIGINT and SIGTERM while the ranks run; restores the previous
/// dispositions. A signal the launcher was started with ignored (a
/// background job of a non-interactive shell) stays ignored, as shells do.
class SignalCatcher {
public:
  SignalCatcher() {
    pendingSignal = 0;
    for (int i = 0; i < 2; ++i) {
      struct sigaction now {};
      sigaction(kSignals[i], nullptr, &old_[i]);
      if (old_[i].sa_handler == SIG_IGN)
        continue;
      now.sa_sigaction = onSignal;
      now.sa_flags = SA_SIGINFO;
      sigemptyset(&now.sa_mask);
      sigaction(kSignals[i], &now, nullptr);
      installed_[i] = true;
    }
  }
  ~SignalCatcher() {
    for (int i = 0; i < 2; ++i)
      if (installed_[i])
        sigaction(kSignals[i], &old_[i], nullptr);
  }
  SignalCatcher(const SignalCatcher &) = delete;
  SignalCatcher &operator=(const SignalCatcher &) = delete;

private:
  static constexpr int kSignals[2] = {SIGINT, SIGTERM};
  struct sigaction old_[2]{};
  bool installed_[2] = {false, false};
};

double graceSeconds() {
  const char *v = std::getenv("FSDP_RUN_GRACE_SECONDS");
  if (!v || !*v)
    return 30.0;
  char *end = nullptr;
  errno = 0;
  double s = std::strtod(v, &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(s) || s < 0 || s > 86400)
    throw std::runtime_error(std::string("FSDP_RUN_GRACE_SECONDS='") + v +
                             "' is not a number of seconds in [0, 86400]");
  return s;
}

/// Rank 0's rendezvous socket, listening on a free port of 127.0.0.1 from
/// before any rank starts and handed to rank 0 (FSDPRT_STORE_FD): picking
/// a port and letting rank 0 bind it later would let two jobs started at
/// once pick the same one and join each other's rendezvous.
struct StoreListener {
  int fd = -1;
  int port = 0;
};

StoreListener listenOnLoopback() {
  // Not close-on-exec: rank 0 inherits it; the other ranks close it.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0)
    throw std::runtime_error("cannot create the rendezvous socket: " +
                             errnoText(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr)) != 0 ||
      ::listen(fd, 128) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw std::runtime_error("cannot listen on a free port of 127.0.0.1: " +
                             errnoText(err));
  }
  return {fd, ntohs(addr.sin_port)};
}

std::string realPath(const std::string &path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool isExecutableFile(const std::string &path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

/// What execvp would run for `name` (no '/'), or "".
std::string searchPath(const std::string &name) {
  const char *path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  for (;;) {
    size_t end = dirs.find(':', begin);
    std::string dir = dirs.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (isExecutableFile(candidate))
      return candidate;
    if (end == std::string::npos)
      return "";
    begin = end + 1;
  }
}

std::string baseName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// The file to execute for argv[0]: this very binary (/proc/self/exe's
/// target) when argv[0] names the current program, else what execvp would
/// find.
std::string resolveProgram(const std::string &arg0) {
  std::string self = realPath("/proc/self/exe");
  std::string candidate =
      arg0.find('/') != std::string::npos ? arg0 : searchPath(arg0);
  if (!self.empty()) {
    if (!candidate.empty() && realPath(candidate) == self)
      return self;
    // argv[0] is only a convention: a name that resolves to nothing but is
    // the current program's name still means this program.
    if (candidate.empty() && baseName(arg0) == baseName(self))
      return self;
  }
  if (candidate.empty())
    throw std::runtime_error("cannot find program '" + arg0 +
                             "' (not a path, and not found in PATH)");
  return candidate;
}

const char *const kLaunchVars[] = {
    "RANK",        "LOCAL_RANK",  "WORLD_SIZE",          "LOCAL_WORLD_SIZE",
    "MASTER_ADDR", "MASTER_PORT", "FSDP_RUN_LOCAL_RANKS", "FSDPRT_STORE_FD",
    "FSDP_RUN_LAUNCHER_PID"};

/// The launcher's environment without the variables set per rank.
std::vector<std::string> inheritedEnvironment() {
  std::vector<std::string> env;
  for (char **e = environ; e && *e; ++e) {
    std::string entry = *e;
    std::string name = entry.substr(0, entry.find('='));
    bool overridden = false;
    for (const char *v : kLaunchVars)
      overridden = overridden || name == v;
    if (!overridden)
      env.push_back(std::move(entry));
  }
  return env;
}

struct Rank {
  pid_t pid = -1;
  bool running = false;
};

std::string describeStatus(int status) {
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" +
           (name ? name : "unknown") + ")";
  }
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

bool succeeded(int status) {
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int exitCodeOf(int status) {
  return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

void signalRunning(std::vector<Rank> &ranks, int sig) {
  for (Rank &r : ranks)
    if (r.running)
      ::kill(r.pid, sig);
}

/// SIGKILLs and reaps the ranks started so far (a later rank failed to
/// start: the job cannot run).
void killAndReap(std::vector<Rank> &ranks) {
  signalRunning(ranks, SIGKILL);
  for (Rank &r : ranks) {
    if (!r.running)
      continue;
    int status;
    while (::waitpid(r.pid, &status, 0) < 0 && errno == EINTR) {
    }
    r.running = false;
  }
}

} // namespace

int launchLocalRanks(int nproc, const std::vector<std::string> &argv) {
  if (nproc < 1)
    throw std::runtime_error("the number of processes must be at least 1, "
                             "got " +
                             std::to_string(nproc));
  if (argv.empty() || argv[0].empty())
    throw std::runtime_error("no program to launch (empty argv)");
  const double grace = graceSeconds();
  const std::string program = resolveProgram(argv[0]);
  const StoreListener store = listenOnLoopback();
  const std::string port = std::to_string(store.port);
  const std::vector<std::string> inherited = inheritedEnvironment();

  std::vector<char *> args;
  for (const std::string &a : argv)
    args.push_back(const_cast<char *>(a.c_str()));
  args.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Children start with no blocked signals, whatever the caller's mask.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);

  SignalCatcher catcher;
  std::vector<Rank> ranks(nproc);
  for (int rank = 0; rank < nproc; ++rank) {
    std::vector<std::string> env = inherited;
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("LOCAL_RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=" + std::to_string(nproc));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(nproc));
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + port);
    env.push_back("FSDP_RUN_LOCAL_RANKS=1");
    env.push_back("FSDP_RUN_LAUNCHER_PID=" + std::to_string(::getpid()));
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    if (rank == 0)
      env.push_back("FSDPRT_STORE_FD=" + std::to_string(store.fd));
    else
      posix_spawn_file_actions_addclose(&files, store.fd);
    std::vector<char *> envp;
    for (std::string &e : env)
      envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t pid;
    int err = ::posix_spawn(&pid, program.c_str(), &files, &attr, args.data(),
                            envp.data());
    posix_spawn_file_actions_destroy(&files);
    if (err != 0) {
      killAndReap(ranks);
      posix_spawnattr_destroy(&attr);
      ::close(store.fd);
      throw std::runtime_error("cannot start rank " + std::to_string(rank) +
                               " ('" + program + "'): " + errnoText(err));
    }
    ranks[rank] = Rank{pid, true};
  }
  posix_spawnattr_destroy(&attr);
  ::close(store.fd); // rank 0 holds it now

  // Poll rather than block in waitpid: a signal, a grace deadline or any
  // rank's exit must all wake the loop, and 10 ms is nothing next to a job.
  enum class Phase { Running, Grace, Terminating, Killing };
  Phase phase = Phase::Running;
  Clock::time_point deadline{};
  auto after = [](double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(seconds));
  };
  std::optional<int> result;
  int forwarded = 0;
  int alive = nproc;
  while (alive > 0) {
    for (int rank = 0; rank < nproc; ++rank) {
      Rank &r = ranks[rank];
      if (!r.running)
        continue;
      int status = 0;
      pid_t got = ::waitpid(r.pid, &status, WNOHANG);
      if (got == 0 || (got < 0 && errno == EINTR))
        continue;
      r.running = false;
      --alive;
      if (got < 0) {
        // Reaped by someone else (a SIGCHLD handler of the caller): its
        // status is lost, which must not pass for success.
        if (!result) {
          printLine("fsdp-run: rank " + std::to_string(rank) + " (pid " +
                    std::to_string(r.pid) +
                    ") could not be waited for: " + errnoText(errno) + "\n");
          result = 1;
        }
      } else if (!succeeded(status) && !result) {
        printLine("fsdp-run: rank " + std::to_string(rank) + " (pid " +
                  std::to_string(r.pid) + ") " + describeStatus(status) + "\n");
        result = exitCodeOf(status);
      }
      if (result && phase == Phase::Running) {
        // The survivors fail their next collective; give them the time to
        // report it themselves before stopping them.
        phase = Phase::Grace;
        deadline = after(grace);
      }
    }
    if (alive == 0)
      break;
    if (int sig = pendingSignal) {
      pendingSignal = 0;
      forwarded = sig;
      if (!pendingFromKernel)
        signalRunning(ranks, sig);
      if (phase == Phase::Running || phase == Phase::Grace) {
        phase = Phase::Terminating;
        deadline = after(grace);
      }
    }
    if (phase == Phase::Grace && Clock::now() >= deadline) {
      signalRunning(ranks, SIGTERM);
      phase = Phase::Terminating;
      deadline = after(grace);
    } else if (phase == Phase::Terminating && Clock::now() >= deadline) {
      signalRunning(ranks, SIGKILL);
      phase = Phase::Killing;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  // An interrupted job is not a successful one, even if every rank handled
  // the signal and exited cleanly.
  return result.value_or(forwarded ? 128 + forwarded : 0);
}

void endWithLauncher() {
  const char *launcher = std::getenv("FSDP_RUN_LAUNCHER_PID");
  if (!launcher || !*launcher)
    return;
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The launcher may have died before the line above: then this process was
  // re-parented already and no signal will come.
  if (std::to_string(::getppid()) != launcher) {
    printLine("fsdp-run: rank started by launcher " + std::string(launcher) +
              ", which is gone: exiting\n");
    std::_Exit(1);
  }
}

} // namespace driver
} // namespace fsdp
