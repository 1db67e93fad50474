// quiet_io (agent/detect/conditions/quiet_io.cpp): over `for` the process
// wrote at most `max_file_write_bytes` to files and sent small messages at a
// steady pace (at least one send, no pause longer than `max_send_gap`, at
// most `max_net_send_bytes` in all and `max_bytes_per_send` on average) — a
// miner talking to its pool and nothing else. Judged from process_io
// readings, only when they cover the whole window with every counter. Over
// time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class QuietIoConditionTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when(
        "{quiet_io: {for: 10m, max_file_write_bytes: 4096, max_net_send_bytes: 64KiB, "
        "max_bytes_per_send: 1KiB, max_send_gap: 5m}}");

    void io(uint64_t ts_s, std::optional<uint64_t> file_write_bytes,
            std::optional<uint64_t> net_send_bytes, std::optional<uint64_t> net_sends) {
        evidence(kPid).io.push_back(
            IoSample{ts_s * kSecond, ProcessIo{file_write_bytes, net_send_bytes, net_sends}});
    }
    // A miner: 8 KiB written at start-up, before the window; then one share
    // of 200 bytes a minute, each reading where the send count moved.
    void shares_each_minute() {
        io(300, 8192, 5000, 20);  // the counters at the window's start
        for (uint64_t minute = 1; minute <= 10; ++minute) {
            io(300 + 60 * minute, 8192, 5000 + 200 * minute, 20 + minute);
        }
    }
    static constexpr uint32_t kPid = 500;
    static constexpr uint64_t kNow = 900 * kSecond;  // the window is [300 s, 900 s]
};

TEST_F(QuietIoConditionTest, a_miner_writing_nothing_and_sending_small_messages_steadily_holds) {
    exec(kPid, "/usr/bin/worker");
    shares_each_minute();
    ASSERT_TRUE(holds(rule_, "quiet_io", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "telemetry");
    EXPECT_EQ(in_.extra[0].event_type, "process_io");
    EXPECT_EQ(in_.extra[0].field, "io");
    EXPECT_EQ(in_.extra[0].detail,
              "in 600s: 0 bytes written to files, 10 network sends of 2000 bytes (longest pause "
              "60s)");

    // A write up to the limit is still quiet.
    evidence(kPid).io.back().counters.file_write_bytes = 8192 + 4096;
    ASSERT_TRUE(holds(rule_, "quiet_io", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"in 600s: 4096 bytes written to files, 10 "
                                                  "network sends of 2000 bytes (longest pause "
                                                  "60s)"});
}

TEST_F(QuietIoConditionTest,
       a_file_write_over_the_limit_or_a_pause_beyond_max_send_gap_does_not_hold) {
    exec(kPid, "/usr/bin/worker");
    shares_each_minute();
    evidence(kPid).io.back().counters.file_write_bytes = 8192 + 4097;  // one byte over
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());

    // Five minutes of silence between two sends is the most it may keep.
    evidence(kPid).io.clear();
    io(300, 0, 5000, 20);
    io(360, 0, 5200, 21);
    io(660, 0, 5400, 22);  // 300 s after the last send
    io(900, 0, 5600, 23);
    ASSERT_TRUE(holds(rule_, "quiet_io", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"in 600s: 0 bytes written to files, 3 network "
                                                  "sends of 600 bytes (longest pause 300s)"});
    evidence(kPid).io[2].ts_ns = 661 * kSecond;  // 301 s
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));

    // The silence since the last send counts too.
    evidence(kPid).io.pop_back();
    evidence(kPid).io[2].ts_ns = 599 * kSecond;
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));  // 301 s until now
    evidence(kPid).io[2].ts_ns = 600 * kSecond;
    EXPECT_TRUE(holds(rule_, "quiet_io", kPid, kNow));

    // Big sends: 1025 bytes on average.
    evidence(kPid).io.clear();
    io(300, 0, 5000, 20);
    io(600, 0, 5000 + 2050, 22);
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));

    // Silent the whole window: no pool to talk to, however long the gap allowed.
    const auto patient = rule_when("{quiet_io: {for: 10m, max_send_gap: 10m}}");
    evidence(kPid).io.clear();
    io(300, 0, 5000, 20);
    EXPECT_FALSE(holds(patient, "quiet_io", kPid, kNow));
    io(600, 0, 5200, 21);
    EXPECT_TRUE(holds(patient, "quiet_io", kPid, kNow));
}

TEST_F(QuietIoConditionTest, a_counter_going_back_or_readings_short_of_the_window_do_not_hold) {
    exec(kPid, "/usr/bin/worker");
    // The pid was reused within the window: the new process's send count
    // started again from zero (its bytes happen to be above the old ones).
    io(300, 0, 5000, 20);
    io(400, 0, 5200, 2);
    io(600, 0, 5600, 6);
    io(900, 0, 6000, 10);
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());

    // Readings from a second after the window's start: not watched throughout.
    evidence(kPid).io.clear();
    shares_each_minute();
    evidence(kPid).io.front().ts_ns = 301 * kSecond;
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));
    evidence(kPid).io.front().ts_ns = 300 * kSecond;
    EXPECT_TRUE(holds(rule_, "quiet_io", kPid, kNow));

    // No send counts (no payload programs): it cannot be said to be quiet.
    evidence(kPid).io.front().counters.net_sends.reset();
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));
    evidence(kPid).io.clear();
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, kNow));
}

TEST_F(QuietIoConditionTest, more_sends_than_max_sends_do_not_hold) {
    // A cluster worker's heartbeat to its scheduler: small and steady, but
    // far more often than a miner's shares.
    const auto rule = rule_when(
        "{quiet_io: {for: 10m, max_file_write_bytes: 8KiB, max_net_send_bytes: 1MiB, "
        "max_bytes_per_send: 1KiB, max_send_gap: 5m, max_sends: 10}}");
    exec(kPid, "/usr/bin/worker");
    shares_each_minute();
    EXPECT_TRUE(holds(rule, "quiet_io", kPid, kNow));  // ten sends in the window
    evidence(kPid).io.back().counters.net_sends = *evidence(kPid).io.back().counters.net_sends + 1;
    EXPECT_FALSE(holds(rule, "quiet_io", kPid, kNow));
    EXPECT_TRUE(holds(rule_, "quiet_io", kPid, kNow));  // no max_sends: any number
}

TEST_F(QuietIoConditionTest, more_received_than_max_net_recv_bytes_does_not_hold) {
    exec(kPid, "/usr/bin/worker");
    shares_each_minute();
    const auto limited = rule_when(
        "{quiet_io: {for: 10m, max_file_write_bytes: 4096, max_net_send_bytes: 64KiB, "
        "max_bytes_per_send: 1KiB, max_send_gap: 5m, max_net_recv_bytes: 64KiB}}");
    // Readings without receive counts (older records): the limit cannot apply.
    ASSERT_TRUE(holds(limited, "quiet_io", kPid, kNow));
    EXPECT_EQ(in_.extra[0].detail.find("received"), std::string::npos);
    // A job a minute, 600 bytes each: a miner's trickle, named in the evidence.
    auto& readings = evidence(kPid).io;
    for (size_t i = 0; i < readings.size(); ++i) {
        readings[i].counters.net_recv_bytes = 100'000 + 600 * i;
        readings[i].counters.net_recvs = 10 + i;
    }
    ASSERT_TRUE(holds(limited, "quiet_io", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"in 600s: 0 bytes written to files, 10 network "
                                                  "sends of 2000 bytes (longest pause 60s), "
                                                  "6000 bytes received"});
    // A download's worth in the window: not quiet under the limit, quiet without one.
    readings.back().counters.net_recv_bytes = 100'000 + 64 * 1024 + 1;
    EXPECT_FALSE(holds(limited, "quiet_io", kPid, kNow));
    EXPECT_TRUE(holds(rule_, "quiet_io", kPid, kNow));
}

TEST_F(QuietIoConditionTest, depends_on_time) {
    exec(kPid, "/usr/bin/worker");
    shares_each_minute();
    evidence(kPid).io.pop_back();  // the last share at 840 s
    EXPECT_TRUE(holds(rule_, "quiet_io", kPid, kNow));
    // No new reading: the silence grows past max_send_gap.
    EXPECT_FALSE(holds(rule_, "quiet_io", kPid, 1141 * kSecond));
    EXPECT_TRUE(find("quiet_io")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
