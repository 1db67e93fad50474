// GuardPolicyWatcher: hot reload of `rules.correlation_files` (guard
// policies and site correlation rules), the RuleSetWatcher pattern: inotify
// on the directories holding the files (an editor's write-and-rename is
// seen; a ConfigMap volume's `..data` swap too), a short debounce, then a
// reload of every file. A rejected reload
// changes nothing: the caller keeps the last good policies.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/rules/correlation.h"
#include "rules/last_good.h"
#include "rules/watch_loop.h"

namespace gpuguard::rules {

struct GuardPolicyWatcher::Impl {
    std::vector<std::string> files;
    Callbacks callbacks;
    std::chrono::milliseconds debounce{100};

    int inotify_fd = -1;
    int stop_fd = -1;
    std::map<int, std::set<std::string>> names_by_watch;  // directory watch -> file names
    std::thread thread;
    std::atomic<uint64_t> reloads{0};
    std::atomic<uint64_t> rejected{0};

    ~Impl() {
        if (thread.joinable()) {
            const uint64_t one = 1;
            if (write(stop_fd, &one, sizeof one) < 0) {
                logger("rules")->error("cannot stop the guard policy watcher: {}",
                                       std::strerror(errno));
            }
            thread.join();
        }
        if (inotify_fd >= 0) close(inotify_fd);
        if (stop_fd >= 0) close(stop_fd);
    }

    static constexpr uint32_t kMask =
        IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB;

    // One of the files, or a Kubernetes ConfigMap volume's `..data` link,
    // which kubelet swaps on an update while the files' own links stay.
    bool relevant(const inotify_event& event) const {
        if (event.len == 0) return false;
        const auto found = names_by_watch.find(event.wd);
        if (found == names_by_watch.end()) return false;
        return found->second.contains(event.name) || is_configmap_swap(event.name);
    }

    void reload() {
        auto loaded = load_guard_policies(files);
        if (!loaded) {
            rejected.fetch_add(1);
            log_rejection("guard policy change rejected, the previous policies stay active:",
                          loaded.error().message);
            if (callbacks.on_error) callbacks.on_error(loaded.error());
            return;
        }
        reloads.fetch_add(1);
        const size_t rule_count = loaded->rules.size();
        const bool priorities = static_cast<bool>(loaded->priority);
        // Told once they are in force: a reader of the log may act on it.
        if (callbacks.on_reload) callbacks.on_reload(std::move(loaded).value());
        logger("rules")->info("guard policies reloaded: {} correlation rule(s), priorities {}",
                              rule_count, priorities ? "on" : "off");
    }

    void run() {
        run_watch_loop(
            inotify_fd, stop_fd, debounce,
            [this](const inotify_event& event) { return relevant(event); }, [this] { reload(); },
            "guard policy watcher");
    }
};

Result<std::unique_ptr<GuardPolicyWatcher>> GuardPolicyWatcher::start(
    std::vector<std::string> files, Callbacks callbacks, std::chrono::milliseconds debounce) {
    auto impl = std::make_unique<Impl>();
    impl->files = std::move(files);
    impl->callbacks = std::move(callbacks);
    impl->debounce = debounce;
    if (impl->files.empty()) {
        return std::unique_ptr<GuardPolicyWatcher>(new GuardPolicyWatcher(std::move(impl)));
    }
    impl->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    impl->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (impl->inotify_fd < 0 || impl->stop_fd < 0) {
        const int err = errno;
        return fail(ErrorCode::kIo, std::string("inotify/eventfd: ") + std::strerror(err), err);
    }
    for (const auto& file : impl->files) {
        const std::filesystem::path path = std::filesystem::absolute(file);
        const auto dir = path.parent_path();
        const int watch = inotify_add_watch(impl->inotify_fd, dir.c_str(), Impl::kMask);
        if (watch < 0) {
            const int err = errno;
            return fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                        "cannot watch " + dir.string() + ": " + std::strerror(err), err);
        }
        impl->names_by_watch[watch].insert(path.filename().string());
    }
    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<GuardPolicyWatcher>(new GuardPolicyWatcher(std::move(impl)));
}

GuardPolicyWatcher::GuardPolicyWatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

GuardPolicyWatcher::~GuardPolicyWatcher() = default;

uint64_t GuardPolicyWatcher::reloads() const { return impl_->reloads.load(); }
uint64_t GuardPolicyWatcher::rejected() const { return impl_->rejected.load(); }

Result<GuardPoliciesAtStart> load_guard_policies_at_start(
    const std::vector<std::string>& files, const std::filesystem::path& last_good_dir) {
    auto loaded = load_guard_policies(files);
    if (loaded) {
        if (!last_good_dir.empty()) {
            std::vector<RuleFile> copies;
            for (const auto& file : files) {
                auto text = read_file(file);
                if (!text) break;  // gone since: keep the copy there is
                copies.push_back(RuleFile{file, std::move(*text)});
            }
            if (copies.size() == files.size()) {
                if (auto saved = save_last_good(last_good_dir, copies); !saved) {
                    logger("rules")->warn("correlation files: {}", saved.error().message);
                }
            }
        }
        return GuardPoliciesAtStart{std::move(loaded).value(), std::nullopt, ""};
    }
    if (last_good_dir.empty()) return Unexpected{loaded.error()};
    GuardPoliciesAtStart start{{}, loaded.error(), ""};
    // The copy's files by their checksums first; then loaded as files.
    auto kept = read_last_good(last_good_dir);
    std::string why_not;
    if (kept) {
        std::vector<std::string> copies;
        for (size_t index = 0; index < kept->size(); ++index) {
            copies.push_back((last_good_dir / (std::to_string(index) + ".yaml")).string());
        }
        auto from_copy = load_guard_policies(copies);
        if (from_copy) {
            start.policies = std::move(from_copy).value();
            start.running_on = "the last good correlation files (" + std::to_string(copies.size()) +
                               " file(s) kept in " + last_good_dir.string() + ")";
            return start;
        }
        why_not = from_copy.error().message;
    } else {
        why_not = kept.error().message;
    }
    auto builtin = load_guard_policies({});
    if (!builtin) return Unexpected{builtin.error()};
    start.policies = std::move(builtin).value();
    start.running_on = "the built-in correlation rules alone (" + why_not + ")";
    return start;
}

}  // namespace gpuguard::rules
