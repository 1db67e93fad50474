#include "gpuguard/sensor/bpf_pins.h"

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor_support.h"

namespace gpuguard::agent {
namespace {

bool on_bpffs(const std::string& path) {
    struct statfs fs {};
    return statfs(path.c_str(), &fs) == 0 && fs.f_type == BPF_FS_MAGIC;
}

Status make_dir(const std::string& path) {
    if (mkdir(path.c_str(), 0700) == 0 || errno == EEXIST) return {};
    const int err = errno;
    return fail(err == EACCES || err == EPERM ? ErrorCode::kPermission : ErrorCode::kIo,
                "cannot create " + path + ": " + std::strerror(err), err);
}

// Does the map pinned at `file` have `map`'s shape? libbpf refuses to reuse
// one that does not, and the load would fail.
bool pinned_map_matches(const std::string& file, const bpf_map* map) {
    const int fd = bpf_obj_get(file.c_str());
    if (fd < 0) return false;
    bpf_map_info info{};
    uint32_t length = sizeof(info);
    const bool read = bpf_obj_get_info_by_fd(fd, &info, &length) == 0;
    close(fd);
    return read && info.type == static_cast<uint32_t>(bpf_map__type(map)) &&
           info.key_size == bpf_map__key_size(map) && info.value_size == bpf_map__value_size(map) &&
           info.max_entries == bpf_map__max_entries(map) &&
           info.map_flags == bpf_map__map_flags(map);
}

}  // namespace

std::string escape_pin_name(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '%') {
            out += "%25";
        } else if (c == '/') {
            out += "%2F";
        } else if (c == '.') {
            out += "%2E";  // bpffs refuses dots in names (reserved for its own files)
        } else {
            out += c;
        }
    }
    return out;
}

std::string unescape_pin_name(const std::string& name) {
    std::string out;
    for (size_t i = 0; i < name.size(); ++i) {
        if (name.compare(i, 3, "%2F") == 0) {
            out += '/';
            i += 2;
        } else if (name.compare(i, 3, "%2E") == 0) {
            out += '.';
            i += 2;
        } else if (name.compare(i, 3, "%25") == 0) {
            out += '%';
            i += 2;
        } else {
            out += name[i];
        }
    }
    return out;
}

PinDirectory::PinDirectory(std::string path, int lock_fd)
    : path_(std::move(path)), lock_fd_(lock_fd) {
    report_.path = path_;
}

PinDirectory::~PinDirectory() {
    if (lock_fd_ >= 0) close(lock_fd_);  // the flock goes with it
}

Result<std::shared_ptr<PinDirectory>> PinDirectory::claim(const std::string& path) {
    const std::filesystem::path dir = std::filesystem::path(path).lexically_normal();
    std::string clean = dir.string();
    while (clean.size() > 1 && clean.back() == '/') clean.pop_back();
    const std::string parent = std::filesystem::path(clean).parent_path().string();
    if (!on_bpffs(parent)) {
        return fail(ErrorCode::kUnsupported,
                    parent + " is not a mounted bpf filesystem (mount -t bpf bpf " + parent +
                        "): in-kernel enforcement ends with the agent");
    }
    if (auto made = make_dir(clean); !made) return Unexpected{made.error()};
    for (const char* sub : {"/maps", "/links"}) {
        if (auto made = make_dir(clean + sub); !made) return Unexpected{made.error()};
    }
    const int fd = ::open(clean.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        const int err = errno;
        return fail(ErrorCode::kIo, "cannot open " + clean + ": " + std::strerror(err), err);
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int err = errno;
        close(fd);
        return fail(ErrorCode::kInvalidArgument,
                    clean +
                        " is held by another running gpuguard agent: give this one its own "
                        "enforcement.pin_path",
                    err);
    }
    return std::shared_ptr<PinDirectory>(new PinDirectory(clean, fd));
}

void PinDirectory::pin_map_on_load(bpf_map* map) {
    const std::string file = path_ + "/maps/" + bpf_map__name(map);
    if (access(file.c_str(), F_OK) == 0) {
        if (pinned_map_matches(file, map)) {
            ++report_.maps_reused;
        } else {
            logger("enforcer")
                ->warn(
                    "pinned map {} does not match this gpuguard's (an upgrade?): unpinned, "
                    "{} starts empty",
                    file, bpf_map__name(map));
            unlink(file.c_str());
            ++report_.maps_dropped;
        }
    }
    // libbpf reuses a pinned map at this path on load, or creates and pins one.
    bpf_map__set_pin_path(map, file.c_str());
}

void PinDirectory::note_pinned_map(const bpf_map* map) {
    bpf_map_info info{};
    uint32_t size = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_map__fd(map), &info, &size) == 0) {
        pinned_[path_ + "/maps/" + bpf_map__name(map)] = Pinned{false, info.id};
    }
}

namespace {
uint32_t link_id(const bpf_link* link) {
    bpf_link_info info{};
    uint32_t size = sizeof(info);
    return bpf_obj_get_info_by_fd(bpf_link__fd(link), &info, &size) == 0 ? info.id : 0;
}
}  // namespace

std::string PinDirectory::link_file(const std::string& name) const {
    return path_ + "/links/" + name;
}

bpf_link* PinDirectory::open_link(const std::string& name) {
    const std::string file = link_file(name);
    if (access(file.c_str(), F_OK) != 0) return nullptr;
    bpf_link* link = bpf_link__open(file.c_str());
    if (!link) {
        logger("enforcer")
            ->warn("pinned link {} cannot be opened ({}): unpinned", file, errno_text(errno));
        unlink(file.c_str());
    }
    if (link) pinned_[file] = Pinned{true, link_id(link)};  // taken over: ours now
    return link;
}

Status PinDirectory::pin_link(bpf_link* link, const std::string& name) {
    const std::string file = link_file(name);
    unlink(file.c_str());  // an earlier agent's: its holder decides when it detaches
    if (int err = bpf_link__pin(link, file.c_str()); err) {
        return Unexpected{libbpf_error("pinning link " + file, err)};
    }
    pinned_[file] = Pinned{true, link_id(link)};
    return {};
}

void PinDirectory::unpin_link(const std::string& name) {
    unlink(link_file(name).c_str());
    pinned_.erase(link_file(name));
}

std::vector<std::string> PinDirectory::link_names(const std::string& prefix) const {
    std::vector<std::string> names;
    auto entries = list_directory(path_ + "/links");  // getdents64: a preload cannot hide pins
    if (!entries) return names;
    for (const DirEntry& entry : *entries) {
        if (entry.name.starts_with(prefix)) names.push_back(entry.name);
    }
    return names;
}

void PinDirectory::remove_all() {
    pinned_.clear();
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
    if (ec) logger("enforcer")->warn("removing pins under {}: {}", path_, ec.message());
}

}  // namespace gpuguard::agent

namespace gpuguard::agent {

std::vector<MissingPin> PinDirectory::restore_missing() {
    std::vector<MissingPin> missing;
    for (auto it = pinned_.begin(); it != pinned_.end();) {
        const auto& [file, pinned] = *it;
        if (access(file.c_str(), F_OK) == 0 || errno != ENOENT) {
            ++it;
            continue;
        }
        MissingPin pin{file, false, ""};
        // The directory may have gone with it (rm -r): made again first.
        (void)make_dir(path_);
        (void)make_dir(std::filesystem::path(file).parent_path().string());
        const int fd = pinned.id == 0 ? -ENOENT
                       : pinned.link  ? bpf_link_get_fd_by_id(pinned.id)
                                      : bpf_map_get_fd_by_id(pinned.id);
        if (fd < 0) {
            pin.error = "the agent no longer holds it: " + errno_text(-fd);
        } else if (int err = bpf_obj_pin(fd, file.c_str()); err) {
            pin.error = errno_text(-err);
        } else {
            pin.restored = true;
        }
        if (fd >= 0) close(fd);
        missing.push_back(std::move(pin));
        it = missing.back().restored ? std::next(it) : pinned_.erase(it);
    }
    return missing;
}

}  // namespace gpuguard::agent
