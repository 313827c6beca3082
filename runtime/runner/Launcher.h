//===- Launcher.h - Runs the local ranks of one job -------------*- C++ -*-===//
//
// `fsdp-run --nproc N ...` re-executes itself N times with torchrun's
// environment, so each rank joins the rendezvous exactly as under torchrun
// (the runtime reads it in comm/LaunchEnv.cpp). The launcher's job is
// lifecycle: when one rank dies its peers would block in their next
// collective until the collective timeout, so after a short grace period the
// survivors are terminated and the first failure is what gets reported.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DRIVER_LAUNCHER_H
#define FSDP_DRIVER_LAUNCHER_H

#include <string>
#include <vector>

namespace fsdp {
namespace driver {

/// Starts `nproc` copies of `argv` (the children's full command line,
/// without the launcher's own options such as --nproc) as ranks 0..nproc-1
/// and waits for all of them. argv[0] naming the current program (by path or
/// through PATH) runs /proc/self/exe, so a rebuilt or relative binary is
/// the same one; anything else is looked up in PATH. Each child gets the
/// launcher's environment plus RANK, LOCAL_RANK, WORLD_SIZE,
/// LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT (a port that was free
/// on 127.0.0.1), FSDP_RUN_LOCAL_RANKS=1 and FSDP_RUN_LAUNCHER_PID, and
/// inherits stdin, stdout and stderr.
///
/// The first rank to exit non-zero or be killed by a signal is reported on
/// stderr in one line ("fsdp-run: rank 1 (pid 1234) was killed by signal 9
/// (Killed)" or "... exited with status 3"); the others get a grace period
/// (FSDP_RUN_GRACE_SECONDS, default 30) to exit by themselves, then SIGTERM,
/// then after another grace period SIGKILL. SIGINT and SIGTERM sent to the
/// launcher are forwarded to the running ranks (not those the terminal sent
/// to the whole foreground process group, ranks included, on Ctrl-C), who
/// are killed with SIGKILL if still alive a grace period later.
///
/// Returns 0 when every rank exited with 0, else the first failing rank's
/// exit status, or 128 + signal if it was killed; 128 + the forwarded
/// signal if the launcher was interrupted and every rank still exited 0.
/// Throws std::runtime_error for bad arguments, a malformed
/// FSDP_RUN_GRACE_SECONDS or a rank that cannot be started (after stopping
/// those already started). Installs SIGINT/SIGTERM handlers while it runs
/// (restored on return): call it from one thread at a time.
int launchLocalRanks(int nproc, const std::vector<std::string> &argv);

/// In a rank launchLocalRanks started (FSDP_RUN_LAUNCHER_PID in its
/// environment): SIGTERM when the launcher dies, even by SIGKILL, so that no
/// rank trains on as an orphan (PR_SET_PDEATHSIG); exits at once if the
/// launcher is already gone. Nothing outside such a rank.
void endWithLauncher();

} // namespace driver
} // namespace fsdp

#endif // FSDP_DRIVER_LAUNCHER_H
