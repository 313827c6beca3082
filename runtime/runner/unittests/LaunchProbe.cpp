//===- LaunchProbe.cpp - A rank process for the launcher tests ------------===//
//
// Started by launchLocalRanks in LauncherTest.cpp. FSDP_LAUNCH_PROBE_MODE
// chooses what each rank does; every rank first writes what it was given
// (its launch environment and argv) to $FSDP_LAUNCH_PROBE_DIR/rank<RANK>,
// so the test can check it and know the rank has started.
//
//===----------------------------------------------------------------------===//
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <unistd.h>

static std::string env(const char *name) {
  const char *v = std::getenv(name);
  return v ? v : "<unset>";
}

/// Long enough that only the launcher can end it within a test's timeout.
[[noreturn]] static void sleepForever() {
  std::this_thread::sleep_for(std::chrono::seconds(120));
  std::exit(99);
}

int main(int argc, char **argv) {
  std::string mode = env("FSDP_LAUNCH_PROBE_MODE");
  std::string rank = env("RANK");
  {
    std::string path = env("FSDP_LAUNCH_PROBE_DIR") + "/rank" + rank;
    std::ofstream out(path + ".tmp");
    for (const char *name :
         {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
          "MASTER_PORT", "FSDP_RUN_LOCAL_RANKS"})
      out << name << "=" << env(name) << "\n";
    for (int i = 0; i < argc; ++i)
      out << "argv=" << argv[i] << "\n";
    out.close();
    std::rename((path + ".tmp").c_str(), path.c_str());
  }
  if (mode == "ok")
    return 0;
  if (mode == "kill1") { // rank 1 dies by SIGKILL, the others hang
    if (rank == "1")
      ::kill(::getpid(), SIGKILL);
    sleepForever();
  }
  if (mode == "exit3") { // rank 0 exits 3, the others hang
    if (rank == "0")
      return 3;
    sleepForever();
  }
  if (mode == "ignore-term") { // rank 0 exits 1, rank 1 ignores SIGTERM
    if (rank == "0")
      return 1;
    std::signal(SIGTERM, SIG_IGN);
    sleepForever();
  }
  if (mode == "wait") // ended by a signal the launcher forwards
    sleepForever();
  std::fprintf(stderr, "launch probe: unknown FSDP_LAUNCH_PROBE_MODE '%s'\n",
               mode.c_str());
  return 64;
}
