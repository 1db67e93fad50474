// The Enforcer's interfaces (gpuguard/enforce/enforcer.h) implemented by the
// sensor room's kernel programs: the composition root wires them together,
// so enforce never includes libbpf's room and sensor never the enforcer's.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "gpuguard/common/result.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/sensor_enforce.h"

namespace gpuguard::agent {

// deny_gpu through KernelEnforcer's cgroup/dev (and BPF LSM) programs.
class KernelGpuDenier : public GpuDenier {
  public:
    explicit KernelGpuDenier(KernelEnforcer& kernel) : kernel_(kernel) {}
    Status deny_cgroup(const std::string& cgroup_path) override {
        return kernel_.deny_cgroup(cgroup_path);
    }
    Status deny_process(uint32_t pid) override { return kernel_.deny_process(pid); }
    std::string name() const override { return kernel_.name(); }

  private:
    KernelEnforcer& kernel_;
};

// block_ip through KernelEnforcer's cgroup/connect4/6 filter.
class CgroupConnectBlocker : public AddressBlocker {
  public:
    explicit CgroupConnectBlocker(KernelEnforcer& kernel) : kernel_(kernel) {}
    Status block(const std::string& ip, std::chrono::seconds ttl) override {
        return kernel_.block_address(ip, ttl);
    }
    std::string name() const override { return "cgroup_connect"; }

  private:
    KernelEnforcer& kernel_;
};

// kill_now registrations into the Sensor's known_bad maps.
class SensorKnownBad : public KnownBadRegistry {
  public:
    explicit SensorKnownBad(Sensor& sensor) : sensor_(sensor) {}
    Status add_known_bad_file(const FileIdentity& file, uint32_t rule_id) override {
        return sensor_.add_known_bad_file(file.dev, file.ino, rule_id);
    }
    Status add_known_bad_name(const std::string& comm, uint32_t rule_id) override {
        return sensor_.add_known_bad_name(comm, rule_id);
    }

  private:
    Sensor& sensor_;
};

}  // namespace gpuguard::agent
