// PoolProber's rate limits and counts (verify.peer_interval_s,
// verify.max_per_hour): a probe not made is counted (and logged), never lost
// silently; /metrics reads the counts (gpuguard_pool_probes_total,
// gpuguard_pool_probes_skipped_total). Every peer here is a loopback
// address, which the prober refuses to speak to: no packet is sent.
#include "agent/daemon/pool_prober.h"

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <vector>

#include <gtest/gtest.h>
#include <unistd.h>

namespace {

using gpuguard::agent::Event;
using gpuguard::agent::PoolProbe;
using gpuguard::agent::PoolProber;
using gpuguard::agent::ProbeRequest;
using gpuguard::agent::TaskInfo;
using gpuguard::agent::VerifyConfig;

constexpr uint64_t kSecond = 1'000'000'000ull;

class PoolProberLimits : public ::testing::Test {
  protected:
    PoolProberLimits() {
        config_.active = true;
        config_.max_per_hour = 2;
        config_.peer_interval_s = 60;
    }
    void start() {
        prober_ = std::make_unique<PoolProber>(config_, "/proc", [this](Event event) {
            std::lock_guard lock(mutex_);
            if (const auto* probe = std::get_if<PoolProbe>(&event.data)) probes_.push_back(*probe);
            arrived_.notify_all();
        });
    }
    void submit(uint16_t port, uint64_t at_s) {
        ProbeRequest request;
        request.pid = static_cast<uint32_t>(getpid());
        request.address = "127.0.0.1";
        request.port = port;
        request.rule = "GG-CORR-0013";
        TaskInfo task;
        task.pid = task.tid = static_cast<uint32_t>(getpid());
        task.comm = "gg-probe-test";
        prober_->submit(task, request, 1000 * kSecond + at_s * kSecond);
    }
    // The probes reported once `count` came (at most 10 s).
    std::vector<PoolProbe> reported(size_t count) {
        std::unique_lock lock(mutex_);
        arrived_.wait_for(lock, std::chrono::seconds(10), [&] { return probes_.size() >= count; });
        return probes_;
    }

    VerifyConfig config_;
    std::mutex mutex_;
    std::condition_variable arrived_;
    std::vector<PoolProbe> probes_;
    std::unique_ptr<PoolProber> prober_;  // last: its thread reports into the above
};

TEST_F(PoolProberLimits,
       a_peer_once_per_interval_all_peers_at_most_max_per_hour_and_every_skip_counted) {
    start();
    submit(3333, 0);   // made (refused: loopback)
    submit(3333, 30);  // skipped: the same peer within 60 s
    submit(3334, 40);  // made: another peer
    submit(3335, 50);  // skipped: two in the last hour
    const auto first = reported(2);
    ASSERT_EQ(first.size(), 2u);
    EXPECT_EQ(first[0].port, 3333);
    EXPECT_EQ(first[1].port, 3334);
    for (const PoolProbe& probe : first) {
        EXPECT_EQ(probe.verdict, "refused: loopback address");
        EXPECT_FALSE(probe.pool);
    }
    EXPECT_EQ(prober_->probed(), 2u);
    EXPECT_EQ(prober_->skipped(), 2u);

    // An hour after the first: room for one more, and the first peer's
    // interval is long over.
    submit(3333, 3601);
    submit(3335, 3602);  // the second of the hour is still within it
    const auto later = reported(3);
    ASSERT_EQ(later.size(), 3u);
    EXPECT_EQ(later[2].port, 3333);
    EXPECT_EQ(prober_->probed(), 3u);
    EXPECT_EQ(prober_->skipped(), 3u);
}

}  // namespace
