// ContainerNames (gpuguard/state/container_names.h): reads a runtime's state
// once per container id and again when that state changes; any parse
// problem means "nothing known", never an error.
#include "gpuguard/state/container_names.h"

#include <fstream>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"

namespace gpuguard::agent {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kMaxRemembered = 4096;
// podman's database holds every container's config; a bigger file is not one.
constexpr uintmax_t kMaxDatabaseBytes = 64u << 20;

std::optional<std::string> read_bytes(const fs::path& path, uintmax_t limit) {
    std::error_code ec;
    const auto size = fs::file_size(path, ec);
    if (ec || size > limit) return std::nullopt;
    // read_file, not an istreambuf_iterator: libstdc++'s filebuf throws on a
    // read error (a file that went away mid-read) instead of ending the read.
    auto bytes = read_file(path);
    if (!bytes) return std::nullopt;
    return std::move(bytes).value();
}

std::optional<json> read_json(const fs::path& path) {
    const auto text = read_bytes(path, 16u << 20);
    if (!text) return std::nullopt;
    auto parsed = json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_discarded()) return std::nullopt;
    return parsed;
}

std::string text_at(const json& object, const char* key) {
    if (!object.is_object()) return "";
    const auto found = object.find(key);
    return found != object.end() && found->is_string() ? found->get<std::string>() : "";
}

void set_if_empty(std::string& field, const std::string& value) {
    if (field.empty()) field = value;
}

// Kubernetes' names from a container's labels or OCI annotations: the
// kubelet's labels (io.kubernetes.*, also what CRI-O annotates) and
// containerd's CRI annotations (io.kubernetes.cri.*).
void take_kube_keys(const json& map, ContainerDetails& d) {
    set_if_empty(d.pod_name, text_at(map, "io.kubernetes.pod.name"));
    set_if_empty(d.pod_name, text_at(map, "io.kubernetes.cri.sandbox-name"));
    set_if_empty(d.pod_namespace, text_at(map, "io.kubernetes.pod.namespace"));
    set_if_empty(d.pod_namespace, text_at(map, "io.kubernetes.cri.sandbox-namespace"));
    set_if_empty(d.pod_uid, text_at(map, "io.kubernetes.pod.uid"));
    set_if_empty(d.pod_uid, text_at(map, "io.kubernetes.cri.sandbox-uid"));
    set_if_empty(d.kube_container, text_at(map, "io.kubernetes.container.name"));
    set_if_empty(d.kube_container, text_at(map, "io.kubernetes.cri.container-name"));
    set_if_empty(d.image, text_at(map, "io.kubernetes.cri.image-name"));
    set_if_empty(d.image, text_at(map, "io.kubernetes.cri-o.ImageName"));
    set_if_empty(d.image_id, text_at(map, "io.kubernetes.cri-o.ImageRef"));
    set_if_empty(d.name, text_at(map, "nerdctl/name"));
    set_if_empty(d.name, d.kube_container);
}

// The end (one past the closing brace) of the JSON object that starts at
// `start`, minding strings; npos when it does not close.
size_t object_end(std::string_view text, size_t start) {
    int depth = 0;
    bool in_string = false;
    for (size_t i = start; i < text.size(); ++i) {
        const char c = text[i];
        if (in_string) {
            if (c == '\\') {
                ++i;
            } else if (c == '"') {
                in_string = false;
            }
        } else if (c == '"') {
            in_string = true;
        } else if (c == '{') {
            ++depth;
        } else if (c == '}' && --depth == 0) {
            return i + 1;
        }
    }
    return std::string_view::npos;
}

// podman keeps each container's config as one JSON value in its database
// (BoltDB bolt_state.db, or SQLite db.sql); a value stays in one piece of
// the file, so the record is found by its id without a database library.
// The last copy wins (the database may keep freed older pages).
std::optional<json> podman_record(const fs::path& database, const std::string& id) {
    const auto bytes = read_bytes(database, kMaxDatabaseBytes);
    if (!bytes) return std::nullopt;
    const std::string_view text(*bytes);
    const std::string needle = "\"id\":\"" + id + "\"";
    std::optional<json> found;
    for (size_t at = text.find(needle); at != std::string_view::npos;
         at = text.find(needle, at + 1)) {
        const size_t start = text.rfind("{\"spec\":", at);
        if (start == std::string_view::npos) continue;
        const size_t end = object_end(text, start);
        if (end == std::string_view::npos || end <= at) continue;
        auto record = json::parse(text.substr(start, end - start), nullptr, false);
        if (!record.is_discarded() && text_at(record, "id") == id) found = std::move(record);
    }
    return found;
}

// containers/storage's list (podman, CRI-O): name, image id and, in the
// metadata string, the image's name (and CRI-O's pod).
bool from_storage_list(const fs::path& list_path, const std::string& id, ContainerDetails& d) {
    const auto list = read_json(list_path);
    if (!list || !list->is_array()) return false;
    for (const auto& entry : *list) {
        if (text_at(entry, "id") != id) continue;
        const auto names = entry.find("names");
        if (names != entry.end() && names->is_array() && !names->empty() &&
            names->front().is_string()) {
            set_if_empty(d.name, names->front().get<std::string>());
        }
        set_if_empty(d.image_id, text_at(entry, "image"));
        const auto metadata = json::parse(text_at(entry, "metadata"), nullptr, false);
        set_if_empty(d.image, text_at(metadata, "image-name"));
        set_if_empty(d.pod_name, text_at(metadata, "pod-name"));
        return true;
    }
    return false;
}

}  // namespace

ContainerNames::Entry ContainerNames::lookup(const ContainerInfo& container) const {
    Entry entry;
    ContainerDetails& d = entry.details;
    const std::string& id = container.id;
    const fs::path storage = root_ / "var/lib/containers/storage";
    if (container.runtime == "docker") {
        entry.source = root_ / "var/lib/docker/containers" / id / "config.v2.json";
        const auto config = read_json(entry.source);
        if (!config) return entry;
        d.name = text_at(*config, "Name");
        if (d.name.starts_with('/')) d.name.erase(0, 1);
        const json& inner = config->value("Config", json::object());
        d.image = text_at(inner, "Image");
        d.image_id = text_at(*config, "Image");
        take_kube_keys(inner.value("Labels", json::object()), d);
    } else if (container.runtime == "podman") {
        for (const char* database : {"libpod/bolt_state.db", "libpod/db.sql"}) {
            const fs::path path = storage / database;
            if (!fs::exists(path)) continue;
            entry.source = path;
            if (const auto record = podman_record(path, id)) {
                d.name = text_at(*record, "name");
                d.image = text_at(*record, "rootfsImageName");
                d.image_id = text_at(*record, "rootfsImageID");
                take_kube_keys(record->value("labels", json::object()), d);
                break;
            }
        }
        if (entry.source.empty()) entry.source = storage / "overlay-containers/containers.json";
        from_storage_list(storage / "overlay-containers/containers.json", id, d);
    } else if (container.runtime == "cri-o") {
        entry.source = storage / "overlay-containers" / id / "userdata/config.json";
        if (const auto config = read_json(entry.source)) {
            take_kube_keys(config->value("annotations", json::object()), d);
        }
        from_storage_list(storage / "overlay-containers/containers.json", id, d);
    } else if (container.runtime == "containerd") {
        // One directory per containerd namespace (k8s.io, moby, default, ...).
        const fs::path tasks = root_ / "run/containerd/io.containerd.runtime.v2.task";
        std::error_code ec;
        for (const DirEntry& ns : entries_of(tasks)) {
            const fs::path config_path = tasks / ns.name / id / "config.json";
            if (!fs::exists(config_path, ec)) continue;
            entry.source = config_path;
            if (const auto config = read_json(config_path)) {
                take_kube_keys(config->value("annotations", json::object()), d);
            }
            break;
        }
    }
    std::error_code ec;
    if (!entry.source.empty()) entry.source_mtime = fs::last_write_time(entry.source, ec);
    return entry;
}

const ContainerDetails& ContainerNames::details_of(const ContainerInfo& container) {
    static const ContainerDetails kNothing;
    const auto found = cache_.find(container.id);
    if (!read_host_) return found != cache_.end() ? found->second.details : kNothing;
    if (found != cache_.end()) {
        Entry& entry = found->second;
        if (entry.source.empty()) return entry.details;  // remembered: the journal's truth
        std::error_code ec;
        const auto mtime = fs::last_write_time(entry.source, ec);
        if (!ec && mtime == entry.source_mtime && !entry.details.empty()) return entry.details;
        entry = lookup(container);
        return entry.details;
    }
    return insert(container.id, lookup(container)).details;
}

void ContainerNames::remember(const Container& container) {
    const auto found = cache_.find(container.id);
    if (found != cache_.end()) {
        found->second.details = container.details;
        return;
    }
    insert(container.id, Entry{container.details, {}, {}});
}

ContainerNames::Entry& ContainerNames::insert(const std::string& id, Entry entry) {
    if (cache_.size() >= kMaxRemembered && !order_.empty()) {
        cache_.erase(order_.front());
        order_.pop_front();
    }
    order_.push_back(id);
    return cache_.insert_or_assign(id, std::move(entry)).first->second;
}

}  // namespace gpuguard::agent
