// library_injection (agent/detect/conditions/library_injection.cpp): the
// process's environment at its first GPU use (a process_env event) has an
// LD_PRELOAD library or LD_LIBRARY_PATH directory nothing vouches for; with
// signs listed, one that also shows any of them. The signs asked for are
// the evidence's field ("environment" with none).
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

using rules::LibrarySign;

class LibraryInjectionTest : public ConditionTest {
  protected:
    const rules::CorrelationRule any_ = rule_when("{library_injection: true}");
    const rules::CorrelationRule temporary_ = rule_when("{library_injection: [temporary]}");
    static constexpr uint32_t kPid = 100;

    // The environment read at `env_ns`, with LD_PRELOAD set.
    void environment(uint64_t env_ns) {
        ProcessEnv env;
        env.ld_preload = "/tmp/.x/libhook.so";
        evidence(kPid).env = env;
        evidence(kPid).env_ns = env_ns;
    }
    void injected(std::string variable, const std::string& path, std::vector<LibrarySign> signs,
                  std::string detail) {
        const bool preloaded = variable == "LD_PRELOAD";
        evidence(kPid).libraries.push_back(InjectedLibrary{
            std::move(variable), path, path, std::move(signs), std::move(detail), preloaded});
    }
};

TEST_F(LibraryInjectionTest, an_unvouched_library_holds_with_the_environment_as_its_field) {
    exec(kPid, "/opt/app/trainer");
    environment(7 * kSecond);
    injected("LD_PRELOAD", "/tmp/.x/libhook.so", {LibrarySign::kTemporary},
             "LD_PRELOAD /tmp/.x/libhook.so (in a temporary directory)");
    injected("LD_LIBRARY_PATH", "/home/u/lib", {}, "LD_LIBRARY_PATH /home/u/lib");
    ASSERT_TRUE(holds(any_, "library_injection", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);  // one piece for the environment
    EXPECT_EQ(in_.extra[0].ts_ns, 7 * kSecond);
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "process_env");
    EXPECT_EQ(in_.extra[0].field, "environment");
    EXPECT_EQ(details(), std::vector<std::string>{"LD_PRELOAD /tmp/.x/libhook.so (in a temporary "
                                                  "directory); LD_LIBRARY_PATH /home/u/lib"});
}

TEST_F(LibraryInjectionTest, no_environment_read_or_nothing_unvouched_does_not_hold) {
    exec(kPid, "/opt/app/trainer");
    // Libraries with no environment behind them (none was read): nothing.
    injected("LD_PRELOAD", "/tmp/.x/libhook.so", {LibrarySign::kTemporary}, "LD_PRELOAD hook");
    EXPECT_FALSE(holds(any_, "library_injection", kPid, 9 * kSecond));
    EXPECT_FALSE(holds(temporary_, "library_injection", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    // An environment whose libraries all are vouched for: nothing either.
    evidence(kPid).libraries.clear();
    environment(7 * kSecond);
    EXPECT_FALSE(holds(any_, "library_injection", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(LibraryInjectionTest, with_signs_only_a_library_showing_one_of_them_holds) {
    exec(kPid, "/opt/app/trainer");
    environment(7 * kSecond);
    injected("LD_PRELOAD", "/home/u/libnew.so",
             {LibrarySign::kRecent, LibrarySign::kOthersCanWrite}, "LD_PRELOAD /home/u/libnew.so");
    EXPECT_FALSE(holds(temporary_, "library_injection", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());

    injected("LD_PRELOAD", "/dev/shm/libx.so", {LibrarySign::kTemporary},
             "LD_PRELOAD /dev/shm/libx.so");
    ASSERT_TRUE(holds(temporary_, "library_injection", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "temporary");
    EXPECT_EQ(details(), std::vector<std::string>{"LD_PRELOAD /dev/shm/libx.so"});

    // Several signs: any of them, all asked for named in the field.
    ASSERT_TRUE(holds(rule_when("{library_injection: [temporary, miner_signature, "
                                "writable_by_others]}"),
                      "library_injection", kPid, 9 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "temporary,miner_signature,writable_by_others");
    EXPECT_EQ(details(), std::vector<std::string>{
                             "LD_PRELOAD /home/u/libnew.so; LD_PRELOAD /dev/shm/libx.so"});
}

TEST_F(LibraryInjectionTest, does_not_depend_on_time) {
    exec(kPid, "/opt/app/trainer");
    environment(7 * kSecond);
    injected("LD_PRELOAD", "/tmp/.x/libhook.so", {LibrarySign::kTemporary}, "LD_PRELOAD hook");
    EXPECT_TRUE(holds(temporary_, "library_injection", kPid, 7 * kSecond + 86'400 * kSecond));
    EXPECT_FALSE(find("library_injection")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
