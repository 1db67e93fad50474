// RuleSetWatcher: inotify on the directories holding the rule files (not the
// files themselves, so editors that write a new file and rename it over the
// old one are seen), a short debounce, then a rebuild. Only user rules are
// recompiled; the built-in pack's databases are shared by every RuleSet.
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/rules/rules.h"
#include "rules/last_good.h"
#include "rules/watch_loop.h"

namespace gpuguard::rules {

struct RuleSetWatcher::Impl {
    RulePaths paths;
    std::shared_ptr<const signatures::Matcher> builtin;
    Callbacks callbacks;
    std::chrono::milliseconds debounce{100};

    int inotify_fd = -1;
    int stop_fd = -1;
    int main_dir_watch = -1;
    int drop_in_watch = -1;
    std::thread thread;

    mutable std::mutex mutex;
    std::shared_ptr<const RuleSet> current;
    std::atomic<uint64_t> reloads{0};
    std::atomic<uint64_t> rejected{0};
    std::optional<Error> start_error;
    std::string started_on;

    // After every good load: the copy a later start falls back on.
    void keep(const std::vector<RuleFile>& files) {
        if (paths.last_good_dir.empty()) return;
        if (auto saved = save_last_good(paths.last_good_dir, files); !saved) {
            logger("rules")->warn("cannot keep the last good rule files: {}",
                                  saved.error().message);
        }
    }

    ~Impl() {
        if (thread.joinable()) {
            const uint64_t one = 1;
            if (write(stop_fd, &one, sizeof one) < 0) {
                logger("rules")->error("cannot stop the rule watcher: {}", std::strerror(errno));
            }
            thread.join();
        }
        if (inotify_fd >= 0) close(inotify_fd);
        if (stop_fd >= 0) close(stop_fd);
    }

    static constexpr uint32_t kMask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE |
                                      IN_DELETE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF;

    void watch_drop_in_dir() {
        if (drop_in_watch >= 0 || paths.drop_in_dir.empty()) return;
        drop_in_watch = inotify_add_watch(inotify_fd, paths.drop_in_dir.c_str(), kMask);
        if (drop_in_watch >= 0) {
            logger("rules")->debug("watching {}", paths.drop_in_dir.string());
        }
    }

    // True when the event concerns a rule file (or the drop-in directory).
    bool relevant(const inotify_event& event) {
        if (event.wd == drop_in_watch) {
            if (event.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                drop_in_watch = -1;
                return true;
            }
            if (event.len == 0) return false;
            const std::string_view name(event.name);
            return name.ends_with(".yaml") || is_configmap_swap(name);
        }
        if (event.wd == main_dir_watch && event.len > 0) {
            const std::string_view name(event.name);
            if (name == paths.main_file.filename().string() || is_configmap_swap(name)) return true;
            if (name == paths.drop_in_dir.filename().string() &&
                paths.drop_in_dir.parent_path() == paths.main_file.parent_path()) {
                watch_drop_in_dir();  // rules.d created (or recreated) after start
                return true;
            }
        }
        return false;
    }

    void reload() {
        auto files = read_rule_files(paths);
        Result<RuleSet> built = files ? RuleSet::build(builtin, *files) : Unexpected{files.error()};
        if (!built) {
            rejected.fetch_add(1);
            log_rejection("rule change rejected, the previous rules stay active:",
                          built.error().message);
            if (callbacks.on_error) callbacks.on_error(built.error());
            return;
        }
        keep(*files);
        auto fresh = std::make_shared<const RuleSet>(std::move(built).value());
        {
            std::lock_guard lock(mutex);
            current = fresh;
        }
        reloads.fetch_add(1);
        // Told once they are in force: a reader of the log may act on it.
        if (callbacks.on_reload) callbacks.on_reload(fresh);
        logger("rules")->info(
            "rules reloaded: {} signatures active from the built-in pack and {} file(s)",
            fresh->effective().size(), fresh->files().size());
    }

    void run() {
        run_watch_loop(
            inotify_fd, stop_fd, debounce,
            [this](const inotify_event& event) { return relevant(event); }, [this] { reload(); },
            "rule watcher");
    }
};

Result<std::unique_ptr<RuleSetWatcher>> RuleSetWatcher::start(
    RulePaths paths, std::shared_ptr<const signatures::Matcher> builtin, Callbacks callbacks,
    std::chrono::milliseconds debounce) {
    auto impl = std::make_unique<Impl>();
    impl->paths = std::move(paths);
    impl->builtin = std::move(builtin);
    impl->callbacks = std::move(callbacks);
    impl->debounce = debounce;

    impl->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    impl->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (impl->inotify_fd < 0 || impl->stop_fd < 0) {
        const int err = errno;
        return fail(ErrorCode::kIo, std::string("inotify/eventfd: ") + std::strerror(err), err);
    }
    const auto main_dir = impl->paths.main_file.parent_path();
    impl->main_dir_watch = inotify_add_watch(impl->inotify_fd, main_dir.c_str(), Impl::kMask);
    if (impl->main_dir_watch < 0) {
        const int err = errno;
        return fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                    "cannot watch " + main_dir.string() + ": " + std::strerror(err), err);
    }
    impl->watch_drop_in_dir();

    // Watches first, then the initial load: a change in between is not lost.
    auto files = read_rule_files(impl->paths);
    Result<RuleSet> initial =
        files ? RuleSet::build(impl->builtin, *files) : Unexpected{files.error()};
    if (initial) {
        impl->keep(*files);
    } else if (impl->paths.last_good_dir.empty()) {
        return Unexpected{initial.error()};
    } else {
        // Never fail open: the last good copy, else the built-in pack alone.
        impl->start_error = initial.error();
        auto kept = read_last_good(impl->paths.last_good_dir);
        initial = kept ? RuleSet::build(impl->builtin, *kept) : Unexpected{kept.error()};
        if (initial) {
            impl->started_on = "the last good rule set (" + std::to_string(kept->size()) +
                               " file(s) kept in " + impl->paths.last_good_dir.string() + ")";
        } else {
            impl->started_on = "the built-in pack alone (" + initial.error().message + ")";
            initial = RuleSet::build(impl->builtin, {});
            if (!initial) return Unexpected{initial.error()};
        }
        log_rejection("rule files rejected at start, running on " + impl->started_on + ":",
                      impl->start_error->message);
    }
    impl->current = std::make_shared<const RuleSet>(std::move(initial).value());

    Impl* raw = impl.get();
    impl->thread = std::thread([raw] { raw->run(); });
    return std::unique_ptr<RuleSetWatcher>(new RuleSetWatcher(std::move(impl)));
}

RuleSetWatcher::RuleSetWatcher(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RuleSetWatcher::~RuleSetWatcher() = default;

std::shared_ptr<const RuleSet> RuleSetWatcher::current() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->current;
}

uint64_t RuleSetWatcher::reloads() const { return impl_->reloads.load(); }
uint64_t RuleSetWatcher::rejected() const { return impl_->rejected.load(); }
const std::optional<Error>& RuleSetWatcher::start_error() const { return impl_->start_error; }
const std::string& RuleSetWatcher::started_on() const { return impl_->started_on; }

}  // namespace gpuguard::rules
