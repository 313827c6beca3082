//===- NetnsTest.cpp - Two simulated hosts in network namespaces ----------===//
//
// Two network namespaces joined by a veth pair with private addresses made
// up by the test stand in for two machines: rank 0 serves the store on its
// "host" address, each rank's Gloo pairs listen on its own address, and no
// loopback path exists between them. Needs root (CAP_NET_ADMIN) and
// iproute2; skipped with a message otherwise. The namespaces (and with them
// the veth pair) are deleted however the test ends.
//
//===----------------------------------------------------------------------===//
#include "Launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <unistd.h>

namespace fsdp {
namespace rt {
namespace test {
namespace {

int sh(const std::string &command) {
  return std::system((command + " >/dev/null 2>&1").c_str());
}

class TwoHosts {
public:
  TwoHosts() {
    std::string id = std::to_string(::getpid() % 100000);
    ns_[0] = "fsdprt-" + id + "-a";
    ns_[1] = "fsdprt-" + id + "-b";
    int subnet = 1 + ::getpid() % 250;
    addr_[0] = "10.231." + std::to_string(subnet) + ".1";
    addr_[1] = "10.231." + std::to_string(subnet) + ".2";
    cleanup();
    std::string va = "fva" + id, vb = "fvb" + id;
    ok_ = sh("ip netns add " + ns_[0]) == 0 &&
          sh("ip netns add " + ns_[1]) == 0 &&
          sh("ip link add " + va + " type veth peer name " + vb) == 0 &&
          sh("ip link set " + va + " netns " + ns_[0]) == 0 &&
          sh("ip link set " + vb + " netns " + ns_[1]) == 0;
    for (int h = 0; ok_ && h < 2; ++h) {
      std::string in = "ip netns exec " + ns_[h] + " ";
      std::string dev = h == 0 ? va : vb;
      ok_ = sh(in + "ip addr add " + addr_[h] + "/24 dev " + dev) == 0 &&
            sh(in + "ip link set " + dev + " up") == 0 &&
            sh(in + "ip link set lo up") == 0;
    }
    if (!ok_)
      cleanup();
  }
  ~TwoHosts() { cleanup(); }
  bool ok() const { return ok_; }
  const std::string &ns(int h) const { return ns_[h]; }
  const std::string &addr(int h) const { return addr_[h]; }

private:
  void cleanup() {
    for (const std::string &n : ns_)
      sh("ip netns delete " + n);
  }
  std::string ns_[2], addr_[2];
  bool ok_ = false;
};

TEST(CommNetns, AllGatherAcrossTwoSimulatedHosts) {
  if (::geteuid() != 0)
    GTEST_SKIP() << "needs root to create network namespaces";
  TwoHosts hosts;
  if (!hosts.ok())
    GTEST_SKIP() << "cannot create network namespaces and a veth pair here "
                    "(no CAP_NET_ADMIN or no iproute2)";
  JobSpec spec;
  spec.scenario = "collectives";
  spec.worldSize = 2;
  spec.env["MASTER_ADDR"] = hosts.addr(0);
  spec.env["FSDPRT_RENDEZVOUS_TIMEOUT_MS"] = "10000";
  for (int r = 0; r < 2; ++r) {
    spec.prefix[r] = {"ip", "netns", "exec", hosts.ns(r)};
    spec.rankEnv[r]["FSDPRT_GLOO_HOSTNAME"] = hosts.addr(r);
  }
  JobResult job = runJob(spec);
  ASSERT_FALSE(job.hung) << job.describe();
  for (const RankResult &r : job.ranks)
    EXPECT_EQ(r.exitCode, 0) << job.describe();
}

} // namespace
} // namespace test
} // namespace rt
} // namespace fsdp
