//===- LauncherTest.cpp - launchLocalRanks: environment, failures ---------===//
//
// The ranks are fsdp_runner_launch_probe processes (LaunchProbe.cpp) whose
// behaviour is chosen by FSDP_LAUNCH_PROBE_MODE, inherited through the
// launcher. Ranks meant to hang sleep for two minutes, so a test finishing
// well before that shows the launcher stopped them; nothing else depends on
// timing.
//
//===----------------------------------------------------------------------===//
#include "runner/Launcher.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>

#ifndef FSDP_LAUNCH_PROBE
#error "FSDP_LAUNCH_PROBE must name the probe binary"
#endif

namespace fsdp {
namespace driver {
namespace {

// When this test binary is itself launched as a rank (the test of argv[0]
// naming the current program), it only reports its environment and exits,
// before GoogleTest's main runs.
const bool kIsSelfProbe = [] {
  const char *dir = std::getenv("FSDP_LAUNCH_SELF_PROBE_DIR");
  if (!dir)
    return false;
  std::ofstream(std::string(dir) + "/rank" + std::getenv("RANK"))
      << "RANK=" << std::getenv("RANK") << "\n";
  std::_Exit(0);
}();

class Launcher : public ::testing::Test {
protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fsdp_launcher_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir = tmpl;
    setenv("FSDP_LAUNCH_PROBE_DIR", dir.c_str(), 1);
    setenv("FSDP_RUN_GRACE_SECONDS", "0.2", 1);
  }
  void TearDown() override {
    for (const char *v :
         {"FSDP_LAUNCH_PROBE_DIR", "FSDP_LAUNCH_PROBE_MODE",
          "FSDP_RUN_GRACE_SECONDS", "FSDP_LAUNCH_SELF_PROBE_DIR"})
      unsetenv(v);
    std::filesystem::remove_all(dir);
  }

  /// Runs the probe on `nproc` ranks in `mode`; returns the launcher's
  /// result, its stderr (and the ranks') in `err`, and the duration.
  int launch(int nproc, const std::string &mode, std::string &err,
             double &seconds) {
    setenv("FSDP_LAUNCH_PROBE_MODE", mode.c_str(), 1);
    auto start = std::chrono::steady_clock::now();
    ::testing::internal::CaptureStderr();
    int rc = launchLocalRanks(nproc, {FSDP_LAUNCH_PROBE, "--flag", "value"});
    err = ::testing::internal::GetCapturedStderr();
    seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    return rc;
  }

  /// The KEY=value lines rank `rank` wrote, plus its argv joined by spaces.
  std::map<std::string, std::string> report(int rank) {
    std::ifstream in(dir + "/rank" + std::to_string(rank));
    EXPECT_TRUE(in.good()) << "rank " << rank << " wrote no report";
    std::map<std::string, std::string> values;
    std::string line;
    while (std::getline(in, line)) {
      size_t eq = line.find('=');
      std::string key = line.substr(0, eq), value = line.substr(eq + 1);
      if (key == "argv")
        values[key] += (values[key].empty() ? "" : " ") + value;
      else
        values[key] = value;
    }
    return values;
  }

  static std::vector<std::string> launcherLines(const std::string &err) {
    std::vector<std::string> lines;
    std::istringstream in(err);
    std::string line;
    while (std::getline(in, line))
      if (line.rfind("fsdp-run:", 0) == 0)
        lines.push_back(line);
    return lines;
  }

  std::string dir;
};

TEST_F(Launcher, AllRanksSucceedWithTorchrunEnvironment) {
  std::string err;
  double seconds;
  ASSERT_EQ(launch(3, "ok", err, seconds), 0) << err;
  EXPECT_TRUE(launcherLines(err).empty()) << err;
  std::set<std::string> ranks, ports;
  for (int r = 0; r < 3; ++r) {
    std::map<std::string, std::string> v = report(r);
    ranks.insert(v["RANK"]);
    ports.insert(v["MASTER_PORT"]);
    EXPECT_EQ(v["RANK"], std::to_string(r));
    EXPECT_EQ(v["LOCAL_RANK"], std::to_string(r));
    EXPECT_EQ(v["WORLD_SIZE"], "3");
    EXPECT_EQ(v["LOCAL_WORLD_SIZE"], "3");
    EXPECT_EQ(v["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(v["FSDP_RUN_LOCAL_RANKS"], "1");
    EXPECT_EQ(v["argv"], std::string(FSDP_LAUNCH_PROBE) + " --flag value");
  }
  EXPECT_EQ(ranks.size(), 3u);
  ASSERT_EQ(ports.size(), 1u) << "ranks disagree on MASTER_PORT";
  int port = std::stoi(*ports.begin());
  EXPECT_GT(port, 0);
  EXPECT_LT(port, 65536);
}

TEST_F(Launcher, RankKilledBySignalIsReportedAndPeersStopped) {
  std::string err;
  double seconds;
  int rc = launch(2, "kill1", err, seconds);
  EXPECT_EQ(rc, 128 + SIGKILL) << err;
  std::vector<std::string> lines = launcherLines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_EQ(lines[0].rfind("fsdp-run: rank 1 (pid ", 0), 0u) << lines[0];
  EXPECT_NE(lines[0].find(") was killed by signal 9 (Killed)"),
            std::string::npos)
      << lines[0];
  EXPECT_LT(seconds, 60) << "rank 0 (sleeping) was not stopped";
}

TEST_F(Launcher, FirstFailingExitStatusIsReturned) {
  std::string err;
  double seconds;
  int rc = launch(2, "exit3", err, seconds);
  EXPECT_EQ(rc, 3) << err;
  std::vector<std::string> lines = launcherLines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_NE(lines[0].find("rank 0 (pid "), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find(") exited with status 3"), std::string::npos)
      << lines[0];
  EXPECT_LT(seconds, 60) << "rank 1 (sleeping) was not stopped";
}

TEST_F(Launcher, RankIgnoringSigtermIsKilled) {
  std::string err;
  double seconds;
  EXPECT_EQ(launch(2, "ignore-term", err, seconds), 1) << err;
  EXPECT_EQ(launcherLines(err).size(), 1u) << err;
  EXPECT_LT(seconds, 60) << "rank 1 (ignoring SIGTERM) was not killed";
}

TEST_F(Launcher, SignalToLauncherIsForwarded) {
  // Interrupt the launcher once both ranks are up (their reports exist, so
  // the launcher's handler is installed).
  std::thread interrupter([this] {
    for (int i = 0; i < 6000; ++i) {
      if (access((dir + "/rank0").c_str(), F_OK) == 0 &&
          access((dir + "/rank1").c_str(), F_OK) == 0) {
        ::kill(::getpid(), SIGINT);
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    // Never reached in a passing run: the ranks sleep for two minutes.
    ADD_FAILURE() << "the ranks did not start within 60 s";
  });
  std::string err;
  double seconds;
  int rc = launch(2, "wait", err, seconds);
  interrupter.join();
  EXPECT_EQ(rc, 128 + SIGINT) << err;
  std::vector<std::string> lines = launcherLines(err);
  ASSERT_EQ(lines.size(), 1u) << err;
  EXPECT_NE(lines[0].find("was killed by signal 2 (Interrupt)"),
            std::string::npos)
      << lines[0];
  EXPECT_LT(seconds, 60);
}

TEST_F(Launcher, CurrentProgramNameRunsThisBinary) {
  // argv[0] is this program's bare name, which is not in PATH: the launcher
  // must run /proc/self/exe (the ranks then act as probes, see kIsSelfProbe).
  (void)kIsSelfProbe;
  setenv("FSDP_LAUNCH_SELF_PROBE_DIR", dir.c_str(), 1);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  ASSERT_GT(n, 0);
  std::string path(self, n);
  std::string name = path.substr(path.find_last_of('/') + 1);
  EXPECT_EQ(launchLocalRanks(2, {name}), 0);
  unsetenv("FSDP_LAUNCH_SELF_PROBE_DIR");
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(report(r)["RANK"], std::to_string(r));
}

TEST_F(Launcher, BadArgumentsThrow) {
  EXPECT_THROW(launchLocalRanks(0, {FSDP_LAUNCH_PROBE}), std::runtime_error);
  EXPECT_THROW(launchLocalRanks(1, {}), std::runtime_error);
  EXPECT_THROW(launchLocalRanks(1, {"/no/such/program"}), std::runtime_error);
  setenv("FSDP_RUN_GRACE_SECONDS", "soon", 1);
  try {
    launchLocalRanks(1, {FSDP_LAUNCH_PROBE});
    ADD_FAILURE() << "a malformed grace period was accepted";
  } catch (const std::runtime_error &e) {
    EXPECT_NE(std::string(e.what()).find("FSDP_RUN_GRACE_SECONDS='soon'"),
              std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace driver
} // namespace fsdp
