//===- Launcher.cpp - Runs N worker processes as one job ------------------===//
#include "Launcher.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FSDPRT_COMM_WORKER
#error "FSDPRT_COMM_WORKER must name the worker binary"
#endif

namespace fsdp {
namespace rt {
namespace test {

std::string JobResult::describe() const {
  std::ostringstream os;
  if (hung)
    os << "job hung and was killed\n";
  for (size_t r = 0; r < ranks.size(); ++r)
    os << "rank " << r << ": exit " << ranks[r].exitCode << "\n"
       << ranks[r].stderrText;
  return os.str();
}

int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr *>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

static std::string readFile(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

JobResult runJob(const JobSpec &spec) {
  static std::atomic<int> jobCounter{0};
  std::string jobId =
      "test-" + std::to_string(::getpid()) + "-" + std::to_string(jobCounter++);
  std::string port = std::to_string(freePort());
  std::vector<int> ranks = spec.startRanks;
  if (ranks.empty())
    for (int r = 0; r < spec.worldSize; ++r)
      ranks.push_back(r);

  JobResult result;
  result.ranks.resize(spec.worldSize);
  std::vector<pid_t> pids(spec.worldSize, -1);
  std::vector<std::string> logs(spec.worldSize);
  auto start = std::chrono::steady_clock::now();
  for (int r : ranks) {
    logs[r] =
        "/tmp/fsdprt-comm-" + jobId + "-rank" + std::to_string(r) + ".log";
    std::map<std::string, std::string> env = {
        {"RANK", std::to_string(r)},
        {"WORLD_SIZE", std::to_string(spec.worldSize)},
        {"LOCAL_RANK", std::to_string(r)},
        {"LOCAL_WORLD_SIZE", std::to_string(spec.worldSize)},
        {"MASTER_ADDR", "127.0.0.1"},
        {"MASTER_PORT", port},
        {"FSDPRT_JOB_ID", jobId}};
    for (const auto &kv : spec.env)
      env[kv.first] = kv.second;
    if (spec.rankEnv.count(r))
      for (const auto &kv : spec.rankEnv.at(r))
        env[kv.first] = kv.second;
    std::vector<std::string> argv;
    if (spec.prefix.count(r))
      argv = spec.prefix.at(r);
    argv.push_back(FSDPRT_COMM_WORKER);
    argv.push_back(spec.scenario);

    pid_t pid = ::fork();
    if (pid == 0) {
      FILE *log = std::fopen(logs[r].c_str(), "w");
      if (log) {
        ::dup2(fileno(log), STDERR_FILENO);
        ::dup2(fileno(log), STDOUT_FILENO);
      }
      for (const auto &kv : env)
        ::setenv(kv.first.c_str(), kv.second.c_str(), 1);
      std::vector<char *> args;
      for (std::string &a : argv)
        args.push_back(a.data());
      args.push_back(nullptr);
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
      std::_Exit(127);
    }
    pids[r] = pid;
  }

  // Reap until every rank has exited or the deadline passes.
  auto running = [&] {
    int count = 0;
    for (pid_t p : pids)
      count += p > 0;
    return count;
  };
  auto isKillable = [&](int r) {
    return std::find(spec.killWhenOthersDone.begin(),
                     spec.killWhenOthersDone.end(),
                     r) != spec.killWhenOthersDone.end();
  };
  while (running() > 0) {
    for (int r = 0; r < spec.worldSize; ++r) {
      if (pids[r] <= 0)
        continue;
      int status = 0;
      if (::waitpid(pids[r], &status, WNOHANG) == pids[r]) {
        result.ranks[r].exitCode =
            WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
        pids[r] = -1;
      }
    }
    bool onlyVictims = true;
    for (int r = 0; r < spec.worldSize; ++r)
      if (pids[r] > 0 && !isKillable(r))
        onlyVictims = false;
    bool late = std::chrono::steady_clock::now() - start > spec.deadline;
    if (late && !onlyVictims)
      result.hung = true;
    if (late || (onlyVictims && running() > 0)) {
      for (pid_t p : pids)
        if (p > 0)
          ::kill(p, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  for (int r : ranks) {
    result.ranks[r].stderrText = readFile(logs[r]);
    std::remove(logs[r].c_str());
  }
  return result;
}

} // namespace test
} // namespace rt
} // namespace fsdp
