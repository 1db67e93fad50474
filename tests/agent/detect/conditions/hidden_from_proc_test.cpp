// hidden_from_proc (agent/detect/conditions/hidden_from_proc.cpp): libc's
// readdir of /proc does not list the live process while the kernel does (a
// hidden_process event), with how it was still seen and how it is hidden.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class HiddenFromProcTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{hidden_from_proc: true}");
    static constexpr uint32_t kPid = 100;
};

TEST_F(HiddenFromProcTest, a_hidden_process_holds_naming_how_it_was_seen_and_hidden) {
    exec(kPid, "/usr/bin/worker");
    book_.record_hidden(kPid, 7 * kSecond,
                        HiddenProcess{"getdents64",
                                      {"/usr/lib/libprocesshider.so"},
                                      {"/etc/ld.so.preload names /usr/lib/libprocesshider.so",
                                       "/usr/lib/libprocesshider.so defines readdir"}});
    ASSERT_TRUE(holds(rule_, "hidden_from_proc", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 7 * kSecond);  // the event's, not now
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "hidden_process");
    EXPECT_EQ(in_.extra[0].signature_id, "");
    EXPECT_EQ(in_.extra[0].field, "hidden");
    EXPECT_EQ(details(), std::vector<std::string>{
                             "not listed by libc's readdir of /proc, listed by getdents64; "
                             "/etc/ld.so.preload names /usr/lib/libprocesshider.so; "
                             "/usr/lib/libprocesshider.so defines readdir"});
}

TEST_F(HiddenFromProcTest, with_no_mechanism_found_it_says_so_and_the_latest_event_wins) {
    exec(kPid, "/usr/bin/worker");
    book_.record_hidden(kPid, 3 * kSecond, HiddenProcess{"getdents64", {}, {"first look"}});
    book_.record_hidden(kPid, 8 * kSecond, HiddenProcess{"process_table", {}, {}});
    ASSERT_TRUE(holds(rule_, "hidden_from_proc", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 8 * kSecond);
    EXPECT_EQ(details(), std::vector<std::string>{
                             "not listed by libc's readdir of /proc, listed by process_table; "
                             "hiding mechanism not found"});
}

TEST_F(HiddenFromProcTest, a_process_readdir_lists_does_not_hold_even_when_another_is_hidden) {
    exec(kPid, "/usr/bin/worker");
    exec(kPid + 1, "/usr/bin/other");
    book_.record_hidden(kPid + 1, 7 * kSecond, HiddenProcess{"getdents64", {}, {}});
    evidence(kPid).libraries.push_back(InjectedLibrary{"LD_PRELOAD",
                                                       "/usr/lib/libprocesshider.so",
                                                       "/usr/lib/libprocesshider.so",
                                                       {},
                                                       "a hiding library preloaded",
                                                       true});
    EXPECT_FALSE(holds(rule_, "hidden_from_proc", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_TRUE(holds(rule_, "hidden_from_proc", kPid + 1, 9 * kSecond));
}

TEST_F(HiddenFromProcTest, does_not_depend_on_time) {
    exec(kPid, "/usr/bin/worker");
    book_.record_hidden(kPid, 7 * kSecond, HiddenProcess{"getdents64", {}, {}});
    EXPECT_TRUE(holds(rule_, "hidden_from_proc", kPid, 7 * kSecond + 86'400 * kSecond));
    EXPECT_FALSE(find("hidden_from_proc")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
