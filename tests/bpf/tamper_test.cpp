// The kernel's view of what other processes do to the agent
// (bpf/tamper.bpf.c), at the sensor: this test process plays the agent
// (ignore_tgid). A child's bpf(2) detach of one of its links is an
// agent_tamper "bpf_command" naming the link, the child's detach of a link
// of its own is nothing; a signal from the child is "signal", SIGCONT is
// not. Runs in every attachment mode (the bpf(2) exit hook is each mode's).
#include <csignal>
#include <string>

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gpuguard/sensor/sensor.h"
#include "tests/support/bpf_objects.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/sensor_harness.h"

namespace {

using gpuguard::agent::AgentTamper;

class TamperTracingTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        auto options = gpuguard::testing::test_sensor_options();
        options.ignore_tgid = static_cast<uint32_t>(getpid());
        auto error = harness_.open(options);
        ASSERT_FALSE(error) << *error;
    }

    gpuguard::testing::SensorHarness harness_;
};

TEST_F(TamperTracingTest, a_detach_of_the_agents_link_is_reported_and_of_another_link_not) {
    auto listed = harness_.sensor().protect_own_bpf_objects();
    ASSERT_TRUE(listed) << listed.error().message;
    EXPECT_GT(*listed, 0u);
    // The exec hook's link: not the bpf(2) hook itself, which reports this.
    const uint32_t link_id = gpuguard::testing::link_id_of_program(getpid(), "gg_sched_exec");
    ASSERT_NE(link_id, 0u);
    const pid_t child = gpuguard::testing::run_in_child("gg-detacher", [link_id] {
        const int own = gpuguard::testing::own_raw_tracepoint_link();
        if (own < 0) return 2;
        (void)bpf_link_detach(own);
        const int agents = bpf_link_get_fd_by_id(link_id);
        if (agents < 0) return 3;
        (void)bpf_link_detach(agents);
        return 0;
    });
    const auto tampers = harness_.of<AgentTamper>(child, 1);
    ASSERT_EQ(tampers.size(), 1u) << "the agent's link only";
    const AgentTamper& tamper = tampers[0].second;
    EXPECT_EQ(tamper.kind, "bpf_command");
    EXPECT_EQ(tamper.command, static_cast<uint32_t>(BPF_LINK_DETACH));
    EXPECT_EQ(tamper.agent_pid, static_cast<uint32_t>(getpid()));
    EXPECT_TRUE(tamper.detail.starts_with("link id " + std::to_string(link_id) + " (fd "))
        << tamper.detail;
}

TEST_F(TamperTracingTest, signals_from_another_process_are_reported_but_sigcont) {
    struct IgnoreUsr2 {
        IgnoreUsr2() { std::signal(SIGUSR2, SIG_IGN); }
        ~IgnoreUsr2() { std::signal(SIGUSR2, SIG_DFL); }
    } ignore;
    const pid_t agent = getpid();
    const pid_t child = gpuguard::testing::run_in_child("gg-signaller", [agent] {
        return kill(agent, SIGUSR2) == 0 && kill(agent, SIGCONT) == 0 ? 0 : 1;
    });
    const auto tampers = harness_.of<AgentTamper>(child, 1);
    ASSERT_EQ(tampers.size(), 1u) << "SIGUSR2, not SIGCONT";
    EXPECT_EQ(tampers[0].second.kind, "signal");
    EXPECT_EQ(tampers[0].second.signal, SIGUSR2);
    EXPECT_EQ(tampers[0].second.result, 1) << "ignored by the agent";
}

}  // namespace
