// scope (agent/detect/conditions/scope.cpp): who and where a rule applies
// to — users and groups by name or id, host or container, containers by id
// glob (bare or "runtime://id"), by name and by image glob, pods by
// namespace glob, executables by path glob, process names exempt. It
// narrows the other conditions and adds no evidence of its own, but for an
// exemption it refuses.
//
// The table reads no host here: a user's name comes from a process_snapshot,
// a group's never (gids only, as in replay), and a container's name from a
// journaled container event.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class ScopeTest : public ConditionTest {
  protected:
    // A scope alone is not a rule: opaque_peer keeps it company.
    static rules::CorrelationRule scoped(const std::string& scope) {
        return rule_when("{scope: " + scope + ", opaque_peer: true}");
    }

    // A process as a process_snapshot tells it: its user's name, its gid
    // and its container ("" on the host).
    void snapshot(uint32_t pid, const std::string& comm, uint32_t uid, uint32_t gid,
                  const std::string& user, const std::string& container_id = "",
                  const std::string& runtime = "") {
        ProcessSnapshot snap;
        snap.exe = "/usr/bin/" + comm;
        snap.argv = {comm};
        snap.user = user;
        snap.container_id = container_id;
        snap.container_runtime = runtime;
        Event event;
        event.ts_ns = kSecond;
        event.task = TaskInfo{pid, pid, 1, uid, gid, 0, comm};
        event.data = std::move(snap);
        table_.apply(event);
    }
    // A journaled container event naming container `id`.
    void name_container(const std::string& id, const std::string& runtime,
                        const std::string& name) {
        ContainerDetails details;
        details.name = name;
        describe_container(id, runtime, details);
    }
    // A journaled container event with what its runtime says of it.
    void describe_container(const std::string& id, const std::string& runtime,
                            const ContainerDetails& details) {
        Event event;
        event.ts_ns = kSecond;
        event.task = TaskInfo{1, 1, 0, 0, 0, 0, "gpuguard"};
        event.data = Container{id, runtime, details};
        table_.apply(event);
    }
    // Whether the scope holds for `pid`; it never leaves evidence.
    bool in(const rules::CorrelationRule& rule, uint32_t pid) {
        const bool held = holds(rule, "scope", pid, 5 * kSecond);
        EXPECT_TRUE(in_.extra.empty());
        EXPECT_TRUE(in_.hits.empty());
        return held;
    }

    static constexpr uint32_t kPid = 300;
    static constexpr uint32_t kOther = 301;
    static constexpr uint32_t kHost = 302;
    const std::string coffee_ = "c0ffee00a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c";
    const std::string beef_ = "beef0000a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c";
};

TEST_F(ScopeTest, users_and_groups_match_by_id_or_by_name_and_their_not_lists_exempt) {
    exec(kPid, "/usr/bin/trainer", {}, 1500);
    exec(kOther, "/usr/bin/trainer", {}, 1501);
    const auto by_uid = scoped("{users: ['1500']}");
    EXPECT_TRUE(in(by_uid, kPid));
    EXPECT_FALSE(in(by_uid, kOther));  // one uid beside

    snapshot(kHost, "trainer", 1700, 1700, "intern");
    const auto by_name = scoped("{users: [intern, '1600']}");
    EXPECT_TRUE(in(by_name, kHost));
    EXPECT_FALSE(in(by_name, kPid));  // no name known, uid not listed
    snapshot(kHost, "trainer", 1700, 1700, "interns");
    EXPECT_FALSE(in(by_name, kHost));  // a name is not a prefix

    const auto not_root = scoped("{not_users: [root, '0']}");
    EXPECT_TRUE(in(not_root, kPid));
    exec(kOther, "/usr/bin/trainer", {}, 0);
    EXPECT_FALSE(in(not_root, kOther));  // by uid
    snapshot(kHost, "trainer", 1700, 1700, "root");
    EXPECT_FALSE(in(not_root, kHost));  // by name

    // The fixture's exec gives gid = uid; groups by gid (names need the host).
    const auto group = scoped("{groups: ['1500']}");
    EXPECT_TRUE(in(group, kPid));
    snapshot(kHost, "trainer", 1500, 1501, "");
    EXPECT_FALSE(in(group, kHost));  // its uid is 1500, its group is not
    const auto not_group = scoped("{not_groups: ['1501']}");
    EXPECT_FALSE(in(not_group, kHost));
    EXPECT_TRUE(in(not_group, kPid));
}

TEST_F(ScopeTest, containers_host_or_container_and_container_ids_by_glob) {
    snapshot(kPid, "trainer", 1000, 1000, "", coffee_, "docker");
    snapshot(kOther, "trainer", 1000, 1000, "", beef_, "containerd");
    exec(kHost, "/usr/bin/trainer");

    const auto host = scoped("{containers: host}");
    EXPECT_TRUE(in(host, kHost));
    EXPECT_FALSE(in(host, kPid));
    const auto container = scoped("{containers: container}");
    EXPECT_TRUE(in(container, kPid));
    EXPECT_FALSE(in(container, kHost));
    const auto any = scoped("{containers: any}");
    EXPECT_TRUE(in(any, kPid));
    EXPECT_TRUE(in(any, kHost));

    const auto ids = scoped("{container_ids: ['c0ffee*']}");
    EXPECT_TRUE(in(ids, kPid));
    EXPECT_FALSE(in(ids, kOther));
    EXPECT_FALSE(in(ids, kHost));  // a host process matches no container glob
    const auto qualified = scoped("{container_ids: ['docker://c0ffee*']}");
    EXPECT_TRUE(in(qualified, kPid));
    EXPECT_FALSE(in(scoped("{container_ids: ['containerd://c0ffee*']}"), kPid));  // runtime
    const auto not_ids = scoped("{not_container_ids: ['docker://c0ffee00*']}");
    EXPECT_FALSE(in(not_ids, kPid));
    EXPECT_TRUE(in(not_ids, kOther));
    EXPECT_TRUE(in(not_ids, kHost));
}

TEST_F(ScopeTest, container_names_by_glob_match_only_a_named_container) {
    name_container(coffee_, "docker", "batch-7");
    snapshot(kPid, "trainer", 1000, 1000, "", coffee_, "docker");
    snapshot(kOther, "trainer", 1000, 1000, "", beef_, "docker");  // no name known
    exec(kHost, "/usr/bin/trainer");
    ASSERT_EQ(table_.find(kPid)->container_details.name, "batch-7");

    const auto names = scoped("{container_names: ['batch-*']}");
    EXPECT_TRUE(in(names, kPid));
    EXPECT_FALSE(in(names, kOther));
    EXPECT_FALSE(in(names, kHost));
    EXPECT_FALSE(in(scoped("{container_names: ['batch-?x']}"), kPid));

    const auto not_names = scoped("{not_container_names: ['batch-*']}");
    EXPECT_FALSE(in(not_names, kPid));
    EXPECT_TRUE(in(not_names, kOther));  // an unnamed container is not exempt
    EXPECT_TRUE(in(not_names, kHost));
}

TEST_F(ScopeTest, not_comm_globs_exempt_process_names_and_scope_does_not_depend_on_time) {
    exec(kPid, "/usr/bin/grep");
    exec(kOther, "/usr/bin/egrep");
    exec(kHost, "/usr/bin/rgrep");
    const auto rule = scoped("{not_comm: [grep, 'rg*']}");
    EXPECT_FALSE(in(rule, kPid));
    EXPECT_TRUE(in(rule, kOther));  // "grep" is the whole name, not a part
    EXPECT_FALSE(in(rule, kHost));
    EXPECT_FALSE(find("scope")->time_dependent());

    // An empty scope takes everyone.
    EXPECT_TRUE(in(scoped("{}"), kPid));
    EXPECT_FALSE(find("scope")->time_dependent());
}

// The executable's scan (ExeScan::package_check) as the correlator keeps it.
void scope_scanned(ProcessEvidence& evidence, const std::string& path, const std::string& check,
                   bool yara_hit, const std::string& package = "") {
    evidence.exe_path = path;
    evidence.package_check = check;
    evidence.exe_yara_hit = yara_hit;
    evidence.package = package;
    evidence.scanned_ns = 3 * kSecond;
}

TEST_F(ScopeTest, an_exempt_name_exempts_only_the_executable_its_package_installed_unchanged) {
    const auto rule = scoped("{not_comm: [curl, grep]}");
    // Before the scan answers: exempt (the benefit of the doubt for milliseconds).
    exec(kPid, "/usr/bin/curl");
    EXPECT_FALSE(holds(rule, "scope", kPid, 5 * kSecond));
    // The file dpkg installed, unchanged; a package without sums; no database at all.
    for (const char* check : {"intact", "unverified", ""}) {
        SCOPED_TRACE(check);
        scope_scanned(evidence(kPid), "/usr/bin/curl", check, false, "dpkg:curl");
        EXPECT_FALSE(holds(rule, "scope", kPid, 5 * kSecond));
    }
    // The agent's own executable carries the pack's strings: YARA hits it.
    scope_scanned(evidence(kPid), "/usr/sbin/gpuguard", "agent", true);
    EXPECT_FALSE(holds(rule, "scope", kPid, 5 * kSecond));

    // A copy nobody installed.
    scope_scanned(evidence(kPid), "/home/dev/.cache/curl", "unowned", false);
    ASSERT_TRUE(holds(rule, "scope", kPid, 5 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 3 * kSecond);
    EXPECT_EQ(in_.extra[0].event_type, "exe_scan");
    EXPECT_EQ(in_.extra[0].field, "exemption");
    EXPECT_EQ(in_.extra[0].detail,
              "name 'curl' is exempt (not_comm curl), but its executable /home/dev/.cache/curl is "
              "owned by no package");
    // The package's file, replaced.
    scope_scanned(evidence(kPid), "/usr/bin/curl", "modified", false, "dpkg:curl");
    ASSERT_TRUE(holds(rule, "scope", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"name 'curl' is exempt (not_comm curl), but its "
                                                  "executable /usr/bin/curl is not the file "
                                                  "dpkg:curl installed"});
    // Intact by its package, or unknown, but YARA knows it.
    for (const char* check : {"intact", ""}) {
        SCOPED_TRACE(check);
        scope_scanned(evidence(kPid), "/usr/bin/curl", check, true, "dpkg:curl");
        ASSERT_TRUE(holds(rule, "scope", kPid, 5 * kSecond));
        EXPECT_EQ(details(),
                  std::vector<std::string>{"name 'curl' is exempt (not_comm curl), but YARA rules "
                                           "hit its executable /usr/bin/curl"});
    }
    // A name the list does not exempt: in scope, no word about exemptions.
    exec(kOther, "/home/dev/.cache/wget");
    scope_scanned(evidence(kOther), "/home/dev/.cache/wget", "unowned", true);
    EXPECT_TRUE(in(rule, kOther));
}

// Plain names are looked up, wildcards matched: the exemption an evidence
// line names is the list's first that matches, whichever kind it is.
TEST_F(ScopeTest, the_exemption_named_is_the_first_glob_in_the_lists_order) {
    exec(kPid, "/home/dev/.cache/curl");
    scope_scanned(evidence(kPid), "/home/dev/.cache/curl", "unowned", false);
    ASSERT_TRUE(holds(scoped("{not_comm: ['cu*', curl]}"), "scope", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"name 'curl' is exempt (not_comm cu*), but its "
                                                  "executable /home/dev/.cache/curl is owned by "
                                                  "no package"});
    ASSERT_TRUE(
        holds(scoped("{not_comm: [wget, curl, 'c?rl', curl]}"), "scope", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"name 'curl' is exempt (not_comm curl), but its "
                                                  "executable /home/dev/.cache/curl is owned by "
                                                  "no package"});
    // A backslash escapes as fnmatch reads it: 'cur\l' is the name curl.
    ASSERT_TRUE(holds(scoped("{not_comm: ['cur\\l']}"), "scope", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"name 'curl' is exempt (not_comm cur\\l), but "
                                                  "its executable /home/dev/.cache/curl is owned "
                                                  "by no package"});
    // Neither kind matches.
    exec(kOther, "/usr/bin/curly");
    EXPECT_TRUE(in(scoped("{not_comm: [curl, 'c?rl', '[a-b]url']}"), kOther));
}

TEST_F(ScopeTest, container_images_and_pod_namespaces_by_glob) {
    ContainerDetails triton;
    triton.image = "nvcr.io/nvidia/tritonserver:24.08-py3";
    triton.pod_namespace = "serving";
    triton.pod_name = "triton-0";
    describe_container(coffee_, "containerd", triton);
    snapshot(kPid, "tritonserver", 1000, 1000, "", coffee_, "containerd");
    ContainerDetails batch;  // a container of no pod the labels name
    batch.image = "docker.io/library/python:3.12";
    describe_container(beef_, "containerd", batch);
    snapshot(kOther, "python3", 1000, 1000, "", beef_, "containerd");
    exec(kHost, "/usr/bin/trainer");

    const auto images = scoped("{container_images: ['nvcr.io/nvidia/*']}");
    EXPECT_TRUE(in(images, kPid));
    EXPECT_FALSE(in(images, kOther));
    EXPECT_FALSE(in(images, kHost));  // a host process has no image
    EXPECT_FALSE(in(scoped("{container_images: ['nvcr.io/nvidia/pytorch:*']}"), kPid));
    const auto not_images = scoped("{not_container_images: ['nvcr.io/nvidia/tritonserver:*']}");
    EXPECT_FALSE(in(not_images, kPid));
    EXPECT_TRUE(in(not_images, kOther));
    EXPECT_TRUE(in(not_images, kHost));

    const auto pods = scoped("{pod_namespaces: ['serv*', team-a]}");
    EXPECT_TRUE(in(pods, kPid));
    EXPECT_FALSE(in(pods, kOther));  // in no pod (yet)
    EXPECT_FALSE(in(pods, kHost));
    const auto not_pods = scoped("{not_pod_namespaces: [serving]}");
    EXPECT_FALSE(in(not_pods, kPid));
    EXPECT_TRUE(in(not_pods, kOther));
    EXPECT_TRUE(in(not_pods, kHost));

    // A pod the runtime's labels do not name, named by the kubelet's pod
    // directory at its first GPU use (a workload event): in from then on.
    Workload workload;
    workload.scheduler = "kubernetes";
    workload.pod_namespace = "team-a";
    workload.pod_name = "sd-worker-1";
    apply(2 * kSecond, kOther, "python3", workload);
    EXPECT_TRUE(in(pods, kOther));
    EXPECT_FALSE(in(scoped("{not_pod_namespaces: ['team-*']}"), kOther));
}

TEST_F(ScopeTest, exe_paths_by_glob_and_an_exempt_path_only_while_its_file_is_trusted) {
    exec(kPid, "/opt/triton/bin/tritonserver");
    exec(kOther, "/opt/triton/bin/tools/perf_analyzer");
    exec(kHost, "/tmp/tritonserver");
    const auto paths = scoped("{exe_paths: ['/opt/triton/bin/*']}");
    EXPECT_TRUE(in(paths, kPid));
    EXPECT_FALSE(in(paths, kOther));  // '*' does not cross '/'
    EXPECT_FALSE(in(paths, kHost));

    const auto exempt = scoped("{not_exe_paths: ['/opt/triton/bin/*', /usr/bin/python3]}");
    EXPECT_FALSE(holds(exempt, "scope", kPid, 5 * kSecond));
    EXPECT_TRUE(in(exempt, kOther));
    EXPECT_TRUE(in(exempt, kHost));
    // A file no package owns is what such a path usually holds: still exempt.
    scope_scanned(evidence(kPid), "/opt/triton/bin/tritonserver", "unowned", false);
    EXPECT_FALSE(holds(exempt, "scope", kPid, 5 * kSecond));
    // YARA hits the file at the exempt path: judged after all, and said why.
    scope_scanned(evidence(kPid), "/opt/triton/bin/tritonserver", "unowned", true);
    ASSERT_TRUE(holds(exempt, "scope", kPid, 5 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "exemption");
    EXPECT_EQ(in_.extra[0].detail,
              "path /opt/triton/bin/tritonserver is exempt (not_exe_paths /opt/triton/bin/*), "
              "but YARA rules hit its executable /opt/triton/bin/tritonserver");

    // Deleted under the running process: the path no longer says what runs.
    constexpr uint32_t kDeleted = 303;
    exec(kDeleted, "/usr/bin/python3 (deleted)");
    ASSERT_TRUE(holds(exempt, "scope", kDeleted, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"path /usr/bin/python3 is exempt (not_exe_paths "
                                                  "/usr/bin/python3), but its executable was "
                                                  "deleted since it started"});
    EXPECT_TRUE(in(scoped("{exe_paths: [/usr/bin/python3]}"), kDeleted));  // still its path
    // ... unless a package upgrade replaced it (the package's file is there).
    ProcessSnapshot upgraded;
    upgraded.exe = "/usr/bin/python3 (deleted)";
    upgraded.exe_package = "dpkg:python3.11-minimal";
    upgraded.argv = {"python3"};
    apply(3 * kSecond, kDeleted, "python3", upgraded);
    ASSERT_EQ(table_.find(kDeleted)->exe_package, "dpkg:python3.11-minimal");
    EXPECT_FALSE(holds(exempt, "scope", kDeleted, 5 * kSecond));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
