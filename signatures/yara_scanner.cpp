// YARA scanning of executables and files: the pack's rules are compiled once;
// a file is read (size-capped) through one descriptor, hashed with sha256 and
// scanned in memory; verdicts are cached by (dev, inode, size, mtime) and by
// sha256, so a miner copied under another name is not scanned twice.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yara.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/unique_fd.h"
#include "gpuguard/signatures/signatures.h"
#include "signatures/database_cache.h"

namespace gpuguard::signatures {
namespace {

// yr_initialize/yr_finalize are reference counted by libyara itself.
class YaraLibrary {
  public:
    YaraLibrary() : rc_(yr_initialize()) {}
    ~YaraLibrary() {
        if (rc_ == ERROR_SUCCESS) yr_finalize();
    }
    YaraLibrary(const YaraLibrary&) = delete;
    YaraLibrary& operator=(const YaraLibrary&) = delete;
    bool ok() const { return rc_ == ERROR_SUCCESS; }

  private:
    int rc_;
};

struct FileKey {
    dev_t device;
    ino_t inode;
    off_t size;
    int64_t mtime_ns;
    auto operator<=>(const FileKey&) const = default;
};

struct Verdict {
    std::string sha256;
    std::vector<std::string> rules;
    std::string md5;
};

ErrorCode code_for_errno(int err) {
    if (err == ENOENT || err == ESRCH) return ErrorCode::kNotFound;
    if (err == EACCES || err == EPERM) return ErrorCode::kPermission;
    return ErrorCode::kIo;
}

// YR_RULES through an in-memory YR_STREAM: saved to bytes, or loaded back.
struct RulesStream {
    std::string bytes;
    size_t read_at = 0;
    YR_STREAM stream{};

    RulesStream() {
        stream.user_data = this;
        stream.write = [](const void* data, size_t size, size_t count, void* user) -> size_t {
            static_cast<RulesStream*>(user)->bytes.append(static_cast<const char*>(data),
                                                          size * count);
            return count;
        };
        stream.read = [](void* data, size_t size, size_t count, void* user) -> size_t {
            auto* in = static_cast<RulesStream*>(user);
            if (size == 0 || in->bytes.size() - in->read_at < size * count) return 0;
            std::memcpy(data, in->bytes.data() + in->read_at, size * count);
            in->read_at += size * count;
            return count;
        };
    }
    RulesStream(const RulesStream&) = delete;
    RulesStream& operator=(const RulesStream&) = delete;
};

// The bytes yr_rules_save writes for `rules`; nullopt when it fails.
std::optional<std::string> saved_rules(YR_RULES* rules) {
    RulesStream out;
    if (yr_rules_save_stream(rules, &out.stream) != ERROR_SUCCESS) return std::nullopt;
    return std::move(out.bytes);
}

// Rules loaded from saved bytes (YARA checks its own header and format
// version); null when it refuses them.
YR_RULES* loaded_rules(std::string bytes) {
    RulesStream in;
    in.bytes = std::move(bytes);
    YR_RULES* rules = nullptr;
    if (yr_rules_load_stream(&in.stream, &rules) != ERROR_SUCCESS) return nullptr;
    return rules;
}

// The cache key of a pack's YARA sources: the SHA-256 of libyara's version
// and every source's name and text.
std::string yara_cache_key(const Pack& pack) {
    std::string described = "yara " YR_VERSION "\n";
    for (const auto& source : pack.yara_sources) {
        described += source.name + " " + std::to_string(source.text.size()) + "\n" + source.text;
    }
    return sha256_hex(described);
}

// Compiles the pack's sources; errors as YARA's file:line: messages.
Result<YR_RULES*> compile_sources(const Pack& pack) {
    YR_COMPILER* compiler = nullptr;
    if (yr_compiler_create(&compiler) != ERROR_SUCCESS) {
        return fail(ErrorCode::kInternal, "yr_compiler_create failed");
    }
    struct Errors {
        std::string source;
        std::vector<std::string> lines;
    } errors;
    yr_compiler_set_callback(
        compiler,
        [](int level, const char*, int line, const YR_RULE*, const char* message, void* user) {
            auto* out = static_cast<Errors*>(user);
            if (level == YARA_ERROR_LEVEL_ERROR) {
                out->lines.push_back(out->source + ":" + std::to_string(line) + ": " + message);
            }
        },
        &errors);
    for (const auto& source : pack.yara_sources) {
        errors.source = source.name;
        // Each file in its own namespace; once a source fails, the compiler
        // cannot take more, so stop there.
        if (yr_compiler_add_string(compiler, source.text.c_str(), nullptr) != 0) break;
    }
    YR_RULES* rules = nullptr;
    if (errors.lines.empty() && yr_compiler_get_rules(compiler, &rules) != ERROR_SUCCESS) {
        errors.lines.push_back("yr_compiler_get_rules failed");
    }
    yr_compiler_destroy(compiler);
    if (!errors.lines.empty()) {
        if (rules) yr_rules_destroy(rules);
        std::string message = "YARA rules do not compile:";
        for (const auto& line : errors.lines) message += "\n" + line;
        return fail(ErrorCode::kParse, message);
    }
    return rules;
}

}  // namespace

struct YaraScanner::Impl {
    YaraLibrary library;
    YR_RULES* rules = nullptr;
    YaraOptions options;
    std::map<std::string, std::vector<std::string>> signatures_of_rule;
    std::vector<std::string> rule_names;
    std::string cache_note;

    mutable std::mutex mutex;
    std::map<FileKey, Verdict> by_file;
    std::map<std::string, std::vector<std::string>> by_sha256;

    ~Impl() {
        if (rules) yr_rules_destroy(rules);
    }

    std::vector<std::string> scan_memory(std::string_view bytes, std::string& error) const {
        std::vector<std::string> hits;
        auto callback = [](YR_SCAN_CONTEXT*, int message, void* data, void* user) -> int {
            if (message == CALLBACK_MSG_RULE_MATCHING) {
                static_cast<std::vector<std::string>*>(user)->push_back(
                    static_cast<YR_RULE*>(data)->identifier);
            }
            return CALLBACK_CONTINUE;
        };
        const int rc = yr_rules_scan_mem(rules, reinterpret_cast<const uint8_t*>(bytes.data()),
                                         bytes.size(), SCAN_FLAGS_FAST_MODE, callback, &hits,
                                         static_cast<int>(options.timeout.count()));
        if (rc != ERROR_SUCCESS) error = "YARA scan failed (error " + std::to_string(rc) + ")";
        std::sort(hits.begin(), hits.end());
        return hits;
    }

    void fill_signatures(YaraReport& report) const {
        std::set<std::string> ids;
        for (const auto& rule : report.rules) {
            if (const auto it = signatures_of_rule.find(rule); it != signatures_of_rule.end()) {
                ids.insert(it->second.begin(), it->second.end());
            }
        }
        report.signature_ids.assign(ids.begin(), ids.end());
    }

    Result<YaraReport> scan_fd(int fd, const std::string& path) {
        struct stat st {};
        if (fstat(fd, &st) != 0) {
            const int err = errno;
            return fail(code_for_errno(err), "fstat " + path + ": " + std::strerror(err), err);
        }
        if (!S_ISREG(st.st_mode)) {
            return fail(ErrorCode::kInvalidArgument, path + " is not a regular file");
        }
        if (static_cast<uint64_t>(st.st_size) > options.max_file_size) {
            return fail(ErrorCode::kUnsupported,
                        path + " is " + std::to_string(st.st_size) + " bytes, over the " +
                            std::to_string(options.max_file_size) + "-byte scan limit");
        }
        YaraReport report;
        report.path = path;
        report.size = static_cast<uint64_t>(st.st_size);
        const FileKey key{st.st_dev, st.st_ino, st.st_size,
                          st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec};
        {
            std::lock_guard lock(mutex);
            if (const auto it = by_file.find(key); it != by_file.end()) {
                report.sha256 = it->second.sha256;
                report.md5 = it->second.md5;
                report.rules = it->second.rules;
                report.from_cache = true;
                fill_signatures(report);
                return report;
            }
        }
        std::string bytes(static_cast<size_t>(st.st_size), '\0');
        size_t done = 0;
        while (done < bytes.size()) {
            const ssize_t n =
                pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                const int err = errno;
                return fail(ErrorCode::kIo, "read " + path + ": " + std::strerror(err), err);
            }
            if (n == 0) break;  // shrank while reading: scan what is there
            done += static_cast<size_t>(n);
        }
        bytes.resize(done);
        report.sha256 = sha256_hex(bytes);
        report.md5 = md5_hex(bytes);
        {
            std::lock_guard lock(mutex);
            if (const auto it = by_sha256.find(report.sha256); it != by_sha256.end()) {
                report.rules = it->second;
                report.from_cache = true;
                by_file[key] = {report.sha256, report.rules, report.md5};
                fill_signatures(report);
                return report;
            }
        }
        std::string error;
        report.rules = scan_memory(bytes, error);
        if (!error.empty()) return fail(ErrorCode::kInternal, path + ": " + error);
        {
            std::lock_guard lock(mutex);
            by_file[key] = {report.sha256, report.rules, report.md5};
            by_sha256[report.sha256] = report.rules;
        }
        fill_signatures(report);
        return report;
    }
};

Result<YaraScanner> YaraScanner::compile(const Pack& pack, YaraOptions options,
                                         const CompileCache& cache) {
    auto impl = std::make_shared<Impl>();
    impl->options = options;
    if (!impl->library.ok()) return fail(ErrorCode::kInternal, "yr_initialize failed");

    std::string key;
    std::filesystem::path cache_file;
    std::string unused_because;
    if (!cache.directory.empty()) {
        key = yara_cache_key(pack);
        cache_file = database_cache::file_of(cache.directory, database_cache::kYara, key);
        if (auto stored = database_cache::load(cache_file, database_cache::kYara, key)) {
            if (stored->size() == 1 && (impl->rules = loaded_rules(std::move((*stored)[0])))) {
                impl->cache_note = "loaded from " + cache_file.string();
            } else {
                unused_because = cache_file.string() + ": YARA refused its rules";
            }
        } else if (stored.error().code != ErrorCode::kNotFound) {
            unused_because = stored.error().message;
        }
    }
    if (!impl->rules) {
        auto compiled = compile_sources(pack);
        if (!compiled) return Unexpected{compiled.error()};
        impl->rules = *compiled;
        // The rules yr_compiler_get_rules returns live in the compiler's
        // arena, whose section buffers start at 1 MiB each and are written
        // through: about 8 MiB resident for the pack's ~40 strings. Saved
        // and loaded again they are one buffer of their own size (~20 KiB);
        // the same bytes are what the cache keeps.
        auto saved = saved_rules(impl->rules);
        if (YR_RULES* compact = saved ? loaded_rules(*saved) : nullptr) {
            yr_rules_destroy(impl->rules);
            impl->rules = compact;
        } else {
            logger("signatures")->warn("YARA rules not compacted: their save and load failed");
        }
        if (!cache_file.empty()) {
            const Status stored =
                saved ? database_cache::store(cache_file, database_cache::kYara, key, {*saved})
                      : Status(fail(ErrorCode::kInternal, "yr_rules_save failed"));
            impl->cache_note = database_cache::compiled_note(cache_file, unused_because, stored);
        }
    }

    std::set<std::string> names;
    if (impl->rules) {
        const YR_RULE* rule = nullptr;
        yr_rules_foreach(impl->rules, rule) { names.insert(rule->identifier); }
    }
    impl->rule_names.assign(names.begin(), names.end());
    for (const auto& signature : pack.signatures) {
        for (const auto& rule : signature.yara_rules) {
            if (!names.contains(rule)) {
                return fail(ErrorCode::kInvalidArgument, signature.source + ": " + signature.id +
                                                             " names YARA rule '" + rule +
                                                             "', which no .yar source defines");
            }
            impl->signatures_of_rule[rule].push_back(signature.id);
        }
    }
    logger("signatures")->debug("compiled {} YARA rules", impl->rule_names.size());
    return YaraScanner(std::move(impl));
}

Result<YaraReport> YaraScanner::scan_pid(pid_t pid, const std::filesystem::path& proc_root) {
    const std::string path = (proc_root / std::to_string(pid) / "exe").string();
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
        const int err = errno;
        return fail(code_for_errno(err), "open " + path + ": " + std::strerror(err), err);
    }
    return impl_->scan_fd(fd.get(), path);
}

Result<YaraReport> YaraScanner::scan_file(const std::filesystem::path& path) {
    const UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
        const int err = errno;
        return fail(code_for_errno(err), "open " + path.string() + ": " + std::strerror(err), err);
    }
    return impl_->scan_fd(fd.get(), path.string());
}

Result<YaraReport> YaraScanner::scan_bytes(std::string_view bytes) {
    YaraReport report;
    report.size = bytes.size();
    report.sha256 = sha256_hex(bytes);
    std::string error;
    report.rules = impl_->scan_memory(bytes, error);
    if (!error.empty()) return fail(ErrorCode::kInternal, error);
    impl_->fill_signatures(report);
    return report;
}

std::vector<std::string> YaraScanner::rule_names() const { return impl_->rule_names; }

const std::string& YaraScanner::cache_note() const { return impl_->cache_note; }

size_t YaraScanner::cache_entries() const {
    std::lock_guard lock(impl_->mutex);
    return impl_->by_file.size();
}

}  // namespace gpuguard::signatures
