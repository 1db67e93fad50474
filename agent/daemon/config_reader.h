// Reading the agent config file: ConfigReader checks each key where it
// stands (file:line of the value) and throws ConfigError, which
// load_config_text turns into an Error. Private to the daemon room, shared
// by config.cpp and config_outputs.cpp.
#pragma once

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "gpuguard/common/yaml_where.h"
#include "gpuguard/daemon/config.h"

namespace gpuguard::agent {

// Thrown inside the config readers only; load_config_text turns it into an Error.
struct ConfigError {
    ErrorCode code;
    std::string message;
};

// Well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
// above U+10FFFF).
inline bool valid_utf8(std::string_view text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        size_t length = 0;
        uint32_t code = 0;
        if (byte < 0x80) {
            ++i;
            continue;
        } else if ((byte & 0xe0) == 0xc0) {
            length = 2;
            code = byte & 0x1f;
        } else if ((byte & 0xf0) == 0xe0) {
            length = 3;
            code = byte & 0x0f;
        } else if ((byte & 0xf8) == 0xf0) {
            length = 4;
            code = byte & 0x07;
        } else {
            return false;
        }
        if (i + length > text.size()) return false;
        for (size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xc0) != 0x80) return false;
            code = code << 6 | (next & 0x3f);
        }
        static constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code < kMinimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
            return false;
        }
        i += length;
    }
    return true;
}

class ConfigReader {
  public:
    explicit ConfigReader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail_at(const YAML::Node& node, const std::string& key,
                              const std::string& what) const {
        throw ConfigError{ErrorCode::kInvalidArgument,
                          yaml_where(source_, node) + ": " + key + ": " + what};
    }

    // Rejects keys of `map` not in `allowed`; `prefix` is the map's own key path.
    void check_keys(const YAML::Node& map, const std::string& prefix,
                    const std::set<std::string>& allowed) const {
        if (!map.IsMap())
            fail_at(map, prefix.empty() ? "(top level)" : prefix, "must be a mapping");
        for (const auto& entry : map) {
            const auto key = entry.first.as<std::string>();
            if (!allowed.contains(key)) {
                std::string known;
                for (const auto& name : allowed) known += (known.empty() ? "" : ", ") + name;
                fail_at(entry.first, join(prefix, key), "unknown key (known: " + known + ")");
            }
        }
    }

    template <typename T>
    T scalar(const YAML::Node& node, const std::string& key, const char* type_name) const {
        if (!node.IsScalar()) fail_at(node, key, std::string("must be ") + type_name);
        try {
            T value = node.as<T>();
            // YAML is Unicode text; yaml-cpp hands other bytes through, which
            // config_to_yaml could not write back as they were.
            if constexpr (std::is_same_v<T, std::string>) {
                if (!valid_utf8(value)) fail_at(node, key, "must be UTF-8 text");
            }
            return value;
        } catch (const YAML::Exception&) {
            fail_at(node, key, std::string("must be ") + type_name);
        }
    }

    // An integer in [min, max]; the error names the value's file:line.
    template <typename T>
    T bounded(const YAML::Node& node, const std::string& key, T min, T max) const {
        const auto value = scalar<T>(node, key, "a non-negative integer");
        if (value < min || value > max) {
            fail_at(node, key,
                    std::to_string(value) + " is not between " + std::to_string(min) + " and " +
                        std::to_string(max));
        }
        return value;
    }

    static std::string join(const std::string& prefix, const std::string& key) {
        return prefix.empty() ? key : prefix + "." + key;
    }

  private:
    std::string source_;
};

// A YAML list of strings into `out`, each item named key[i] in errors.
inline void read_string_list(const ConfigReader& reader, const YAML::Node& list,
                             const std::string& key, std::vector<std::string>& out) {
    if (!list.IsSequence()) reader.fail_at(list, key, "must be a list of strings");
    out.clear();
    for (size_t i = 0; i < list.size(); ++i) {
        out.push_back(
            reader.scalar<std::string>(list[i], key + "[" + std::to_string(i) + "]", "a string"));
    }
}

// `sensor:`, `backends:`, `kubelet:` (config_host.cpp).
void read_sensor(const ConfigReader& reader, const YAML::Node& node, SensorConfig& sensor);
void read_backends(const ConfigReader& reader, const YAML::Node& node, BackendsConfig& backends);
void read_kubelet(const ConfigReader& reader, const YAML::Node& node, KubeletConfig& kubelet);

// `outputs:` (config_outputs.cpp).
void read_outputs(const ConfigReader& reader, const YAML::Node& node,
                  std::vector<siem::SinkConfig>& outputs);

// One integer key of a section and its bounds, for read_bounded.
struct BoundedField {
    const char* key;
    uint32_t* value;
    uint32_t min;
    uint32_t max;
};

// Each of `fields` that `node` (the section `prefix`) sets, read within its
// bounds; the error names the value's file:line and "prefix.key".
inline void read_bounded(const ConfigReader& reader, const YAML::Node& node,
                         const std::string& prefix, std::initializer_list<BoundedField> fields) {
    for (const auto& field : fields) {
        if (const auto value = node[field.key]) {
            *field.value =
                reader.bounded<uint32_t>(value, prefix + "." + field.key, field.min, field.max);
        }
    }
}

}  // namespace gpuguard::agent
