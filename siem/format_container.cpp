#include "siem/format_container.h"

namespace gpuguard::siem {
namespace {

using Json = nlohmann::ordered_json;

// A bare 64-hex image id as a digest ("sha256:..."); a digest stays as it is.
std::string image_digest(const std::string& image_id) {
    if (image_id.size() == 64 &&
        image_id.find_first_not_of("0123456789abcdef") == std::string::npos) {
        return "sha256:" + image_id;
    }
    return image_id;
}

// A Slurm job as ECS's orchestrator (type slurm, resource type job); the
// rest of it is gpuguard.slurm's (ecs_slurm).
void ecs_slurm_orchestrator(JsonWriter& out, const SlurmJob& job) {
    out.key("orchestrator");
    out.begin_object();
    out.member("type", "slurm");
    out.key("resource");
    out.begin_object();
    out.member("type", "job");
    out.member("id", job.job_id);
    out.end_object();
    out.end_object();
}

}  // namespace

void ecs_slurm(JsonWriter& out, const SlurmJob& job) {
    if (job.empty()) return;
    out.key("slurm");
    out.begin_object();
    out.member("job_id", job.job_id);
    out.member_if("step_id", job.step_id);
    out.member_if("user", job.user);
    out.member_if("account", job.account);
    out.member_if("partition", job.partition);
    out.member_if("gpus", job.gpus);
    out.end_object();
}

Json ocsf_slurm(const SlurmJob& job) {
    if (job.empty()) return nullptr;
    Json json;
    json["job_id"] = job.job_id;
    put_if(json, "step_id", job.step_id);
    put_if(json, "user", job.user);
    put_if(json, "account", job.account);
    put_if(json, "partition", job.partition);
    put_if(json, "gpus", job.gpus);
    return json;
}

void ecs_container(JsonWriter& out, const DetectionProcess& process) {
    if (process.container_id.empty()) {
        if (!process.slurm.empty()) ecs_slurm_orchestrator(out, process.slurm);
        return;
    }
    const ContainerDetails& c = process.container;
    out.key("container");
    out.begin_object();
    out.member("id", process.container_id);
    out.member_if("name", c.name);
    out.member_if("runtime", process.container_runtime);
    if (!c.image.empty() || !c.image_id.empty()) {
        out.key("image");
        out.begin_object();
        out.member_if("name", c.image);
        if (!c.image_id.empty()) {
            out.key("hash");
            out.begin_object();
            out.key("all");
            out.begin_array();
            out.value(image_digest(c.image_id));
            out.end_array();
            out.end_object();
        }
        out.end_object();
    }
    out.end_object();
    if (!c.in_pod()) return;
    out.key("orchestrator");
    out.begin_object();
    out.member("type", "kubernetes");
    out.member_if("namespace", c.pod_namespace);
    out.key("resource");
    out.begin_object();
    out.member("type", "pod");
    out.member_if("name", c.pod_name);
    out.member_if("id", c.pod_uid);
    out.end_object();
    out.end_object();
}

Json ocsf_container(const DetectionProcess& process) {
    if (process.container_id.empty()) return nullptr;
    const ContainerDetails& c = process.container;
    Json json;
    json["uid"] = process.container_id;
    put_if(json, "name", c.name);
    put_if(json, "runtime", process.container_runtime);
    if (!c.image.empty() || !c.image_id.empty()) {
        Json image;
        put_if(image, "name", c.image);
        put_if(image, "uid", image_digest(c.image_id));
        json["image"] = std::move(image);
    }
    put_if(json, "pod_uuid", c.pod_uid);
    if (c.in_pod()) json["orchestrator"] = "Kubernetes";
    return json;
}

Json ocsf_kubernetes(const DetectionProcess& process) {
    const ContainerDetails& c = process.container;
    if (process.container_id.empty() || !c.in_pod()) return nullptr;
    Json json;
    put_if(json, "pod_name", c.pod_name);
    put_if(json, "namespace", c.pod_namespace);
    put_if(json, "pod_uid", c.pod_uid);
    put_if(json, "container_name", c.kube_container);
    return json;
}

void put_if(nlohmann::ordered_json& json, const char* key, const std::string& value) {
    if (!value.empty()) json[key] = value;
}

}  // namespace gpuguard::siem
