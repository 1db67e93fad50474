// The container and Kubernetes pod of a detection's process in ECS and OCSF
// (format_json.cpp writes the rest of those records).
#pragma once

#include <nlohmann/json.hpp>

#include "gpuguard/common/detection.h"
#include "siem/json_writer.h"

namespace gpuguard::siem {

// json[key] = value, unless value is empty (OCSF leaves unknown attributes out).
void put_if(nlohmann::ordered_json& json, const char* key, const std::string& value);

// ECS container.{id,name,runtime,image.name,image.hash.all,labels} and, in a
// pod, orchestrator.{type,namespace,resource.{type,name,id}}; on the host,
// in a Slurm job, orchestrator.{type: slurm, resource.{type: job, id}}.
void ecs_container(JsonWriter& out, const DetectionProcess& process);

// gpuguard.slurm.{job_id,step_id,user,account,partition,gpus} in ECS (in the
// gpuguard object); nothing outside a job.
void ecs_slurm(JsonWriter& out, const SlurmJob& job);
// The same for OCSF's unmapped.slurm; null outside a job.
nlohmann::ordered_json ocsf_slurm(const SlurmJob& job);

// OCSF's container object (uid, name, runtime, image {name, uid}, pod_uuid,
// orchestrator); null on the host.
nlohmann::ordered_json ocsf_container(const DetectionProcess& process);

// What OCSF's container object has no attribute for (the pod's name and
// namespace, the Kubernetes container name): for unmapped.kubernetes; null
// outside a pod.
nlohmann::ordered_json ocsf_kubernetes(const DetectionProcess& process);

}  // namespace gpuguard::siem
