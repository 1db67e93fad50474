// module_load (agent/detect/conditions/module_load.cpp): the process loaded
// a kernel module within the rule's window while the host was as `while:`
// asks — a GPU process running, a flagged process in the loader's lineage,
// a miner flagged elsewhere, or any — as EvidenceBook::record_module_load
// saw it at the load. The GPU driver's own modules loaded by its own
// loaders count only under flagged_lineage. One piece of evidence per load.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class ModuleLoadConditionTest : public ConditionTest {
  protected:
    static constexpr uint32_t kLoader = 200;
    static constexpr uint32_t kTrainer = 300;
    static constexpr uint32_t kMiner = 400;
    static constexpr uint32_t kOutOfTreeUnsigned = (1u << 12) | (1u << 13);  // "OE"

    // A module_load rule over `contexts` with a window of 5 minutes.
    static rules::CorrelationRule module_rule(const std::string& contexts,
                                              const std::string& driver = "") {
        return rule_when("{module_load: {while: [" + contexts + "]" +
                             (driver.empty() ? "" : ", " + driver) + "}}",
                         "window: 5m");
    }
    // A rule that flags what it detects; a miner rule when `mitre` is T1496.
    static rules::CorrelationRule flagging_rule(const std::string& id, const std::string& mitre) {
        rules::CorrelationRule rule =
            rule_when("{opaque_peer: true}", "mitre: {id: " + mitre + "}");
        rule.id = id;
        return rule;
    }
    // A process whose parent is `ppid`, by its exec.
    void exec_child(uint32_t pid, uint32_t ppid, const std::string& exe) {
        const std::string comm = exe.substr(exe.rfind('/') + 1);
        Event event;
        event.ts_ns = kSecond;
        event.task = TaskInfo{pid, pid, ppid, 0, 0, 1, comm};
        event.data = Exec{exe, {comm}, false, false, pid};
        table_.apply(event);
    }
    void gpu_process_running() {
        exec(kTrainer, "/opt/app/trainer");
        open_gpu(kTrainer);
    }
    void miner_flagged(const std::string& mitre = "T1496") {
        exec(kMiner, "/tmp/.x/xmrig");
        book_.flag(flagging_rule("MINER-0001", mitre), *table_.find(kMiner), Severity::kWarning);
    }
};

TEST_F(ModuleLoadConditionTest, a_load_while_a_gpu_process_runs_holds_with_the_host_then) {
    exec(kLoader, "/usr/sbin/insmod");
    gpu_process_running();
    book_.record_module_load(kLoader, 10 * kSecond, ModuleLoad{"diamorphine", kOutOfTreeUnsigned});
    const rules::CorrelationRule rule = module_rule("gpu_process");
    ASSERT_TRUE(holds(rule, "module_load", kLoader, 20 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 10 * kSecond);
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "module_load");
    EXPECT_EQ(in_.extra[0].field, "module");
    EXPECT_EQ(details(), std::vector<std::string>{"kernel module diamorphine taints OE loaded by "
                                                  "200 (insmod); GPU processes running: 300 "
                                                  "(trainer)"});

    // One piece of evidence per load, untainted said so.
    book_.record_module_load(kLoader, 12 * kSecond, ModuleLoad{"dummy", 0});
    ASSERT_TRUE(holds(rule, "module_load", kLoader, 20 * kSecond));
    ASSERT_EQ(in_.extra.size(), 2u);
    EXPECT_EQ(in_.extra[1].ts_ns, 12 * kSecond);
    EXPECT_EQ(in_.extra[1].detail,
              "kernel module dummy (untainted) loaded by 200 (insmod); GPU processes running: 300 "
              "(trainer)");
}

TEST_F(ModuleLoadConditionTest, a_flagged_lineage_or_a_miner_elsewhere_holds_each_when_asked) {
    exec(150, "/usr/bin/dropper");
    exec_child(kLoader, 150, "/usr/sbin/insmod");
    book_.flag(flagging_rule("DROP-0001", "T1105"), *table_.find(150), Severity::kWarning);
    miner_flagged();
    book_.record_module_load(kLoader, 10 * kSecond, ModuleLoad{"diamorphine", kOutOfTreeUnsigned});

    ASSERT_TRUE(holds(module_rule("flagged_lineage"), "module_load", kLoader, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"kernel module diamorphine taints OE loaded by "
                                                  "200 (insmod); its ancestor 150 (dropper) was "
                                                  "flagged by DROP-0001"});
    ASSERT_TRUE(holds(module_rule("miner_on_host"), "module_load", kLoader, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "kernel module diamorphine taints OE loaded by 200 (insmod); miners "
                             "running on the host: 400 (xmrig) flagged by MINER-0001"});
    ASSERT_TRUE(holds(module_rule("any"), "module_load", kLoader, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "kernel module diamorphine taints OE loaded by 200 (insmod); its "
                             "ancestor 150 (dropper) was flagged by DROP-0001; miners running on "
                             "the host: 400 (xmrig) flagged by MINER-0001"});
}

TEST_F(ModuleLoadConditionTest, outside_the_contexts_asked_or_the_window_only_any_holds) {
    exec(150, "/usr/bin/dropper");
    exec_child(kLoader, 150, "/usr/sbin/insmod");
    exec(kTrainer, "/opt/app/trainer");  // running, no GPU
    book_.of(kTrainer);
    book_.flag(flagging_rule("DROP-0001", "T1105"), *table_.find(150), Severity::kNotice);
    miner_flagged("T1105");  // flagged, but not a miner
    book_.record_module_load(kLoader, 10 * kSecond, ModuleLoad{"dummy", 0});
    EXPECT_FALSE(holds(module_rule("gpu_process"), "module_load", kLoader, 20 * kSecond));
    EXPECT_FALSE(holds(module_rule("flagged_lineage"), "module_load", kLoader, 20 * kSecond));
    EXPECT_FALSE(holds(module_rule("miner_on_host"), "module_load", kLoader, 20 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    const rules::CorrelationRule any = module_rule("any");
    ASSERT_TRUE(holds(any, "module_load", kLoader, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"kernel module dummy (untainted) loaded by 200 "
                                                  "(insmod); no GPU process running, nothing "
                                                  "flagged"});

    // Within the rule's window of 5 minutes, and not after.
    EXPECT_TRUE(holds(any, "module_load", kLoader, (10 + 300) * kSecond));
    EXPECT_FALSE(holds(any, "module_load", kLoader, (10 + 300) * kSecond + 1));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_TRUE(holds(rule_when("{module_load: {while: [any]}}", "window: 10m"), "module_load",
                      kLoader, (10 + 300) * kSecond + 1));
    EXPECT_FALSE(find("module_load")->time_dependent());
}
TEST_F(ModuleLoadConditionTest, the_drivers_own_load_by_its_loader_counts_only_under_a_flag) {
    const std::string driver =
        "driver_modules: ['nvidia*'], driver_loaders: [modprobe, 'nvidia-modprob*']";
    exec(kLoader, "/usr/sbin/modprobe");
    gpu_process_running();
    miner_flagged();
    book_.record_module_load(kLoader, 10 * kSecond, ModuleLoad{"nvidia_uvm", 1});
    EXPECT_FALSE(holds(module_rule("gpu_process", driver), "module_load", kLoader, 20 * kSecond));
    EXPECT_FALSE(holds(module_rule("miner_on_host", driver), "module_load", kLoader, 20 * kSecond));
    EXPECT_FALSE(holds(module_rule("any", driver), "module_load", kLoader, 20 * kSecond));
    EXPECT_FALSE(holds(module_rule("flagged_lineage", driver), "module_load", kLoader,
                       20 * kSecond));  // nothing flagged behind modprobe
    // Another module by the same loader, or the driver's by another loader, counts.
    book_.record_module_load(kLoader, 11 * kSecond, ModuleLoad{"dummy", 0});
    ASSERT_TRUE(holds(module_rule("gpu_process", driver), "module_load", kLoader, 20 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 11 * kSecond);
    exec(kLoader + 1, "/usr/sbin/insmod");
    book_.record_module_load(kLoader + 1, 10 * kSecond, ModuleLoad{"nvidia_uvm", 1});
    EXPECT_TRUE(
        holds(module_rule("gpu_process", driver), "module_load", kLoader + 1, 20 * kSecond));

    // With the loader itself flagged, the driver's load counts under flagged_lineage.
    book_.flag(flagging_rule("MINER-0001", "T1496"), *table_.find(kLoader), Severity::kWarning);
    book_.record_module_load(kLoader, 12 * kSecond, ModuleLoad{"nvidia", 1});
    ASSERT_TRUE(
        holds(module_rule("flagged_lineage", driver), "module_load", kLoader, 20 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"kernel module nvidia taints P loaded by 200 "
                                                  "(modprobe); the loader 200 (modprobe) was "
                                                  "flagged by MINER-0001"});
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
