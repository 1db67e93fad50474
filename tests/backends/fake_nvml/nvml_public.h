// NVML's C types and constants as NVIDIA's public nvml.h (CUDA 12.x) and the
// NVML API reference document them, written for the fake NVML alone. The
// backend has its own copy (backends/nvml_api.h); the fake must not share
// it, or a layout mistake there would be mirrored here and every backend
// test would still pass. Sizes and offsets below are those of the
// documented layouts on LP64 (x86-64, arm64), worked out by hand from the
// member lists, not from the backend's header.
#pragma once

#include <cstddef>

extern "C" {

// nvmlReturn_t ("nvmlReturn_enum").
typedef enum nvmlReturn_enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_UNKNOWN = 999
} nvmlReturn_t;

typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct nvmlEventSet_st* nvmlEventSet_t;

typedef enum nvmlTemperatureSensors_enum { NVML_TEMPERATURE_GPU = 0 } nvmlTemperatureSensors_t;
typedef enum nvmlClockType_enum {
    NVML_CLOCK_GRAPHICS = 0,
    NVML_CLOCK_SM = 1,
    NVML_CLOCK_MEM = 2,
    NVML_CLOCK_VIDEO = 3
} nvmlClockType_t;
typedef enum nvmlPcieUtilCounter_enum {
    NVML_PCIE_UTIL_TX_BYTES = 0,
    NVML_PCIE_UTIL_RX_BYTES = 1
} nvmlPcieUtilCounter_t;
typedef enum nvmlMemoryErrorType_enum {
    NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
} nvmlMemoryErrorType_t;
typedef enum nvmlEccCounterType_enum {
    NVML_VOLATILE_ECC = 0,
    NVML_AGGREGATE_ECC = 1
} nvmlEccCounterType_t;
typedef enum nvmlPStates_enum { NVML_PSTATE_0 = 0, NVML_PSTATE_UNKNOWN = 32 } nvmlPstates_t;
typedef enum nvmlValueType_enum {
    NVML_VALUE_TYPE_DOUBLE = 0,
    NVML_VALUE_TYPE_UNSIGNED_INT = 1,
    NVML_VALUE_TYPE_UNSIGNED_LONG = 2,
    NVML_VALUE_TYPE_UNSIGNED_LONG_LONG = 3,
    NVML_VALUE_TYPE_SIGNED_LONG_LONG = 4,
    NVML_VALUE_TYPE_SIGNED_INT = 5
} nvmlValueType_t;

#define NVML_FI_DEV_MEMORY_TEMP 82
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFULL
#define nvmlEventTypeSingleBitEccError 0x0000000000000001LL
#define nvmlEventTypeDoubleBitEccError 0x0000000000000002LL
#define nvmlEventTypeXidCriticalError 0x0000000000000008LL
#define nvmlEventTypeClock 0x0000000000000010LL
#define NVML_EVENT_TYPE_XID_CRITICAL_ERROR nvmlEventTypeXidCriticalError

typedef struct nvmlUtilization_st {
    unsigned int gpu;     // percent of time a kernel ran
    unsigned int memory;  // percent of time memory was read or written
} nvmlUtilization_t;

typedef struct nvmlMemory_st {
    unsigned long long total;  // bytes, in this order: total, free, used
    unsigned long long free;
    unsigned long long used;
} nvmlMemory_t;

// nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 fills it.
typedef struct nvmlPciInfo_st {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

// The three process-list layouts: v1 (the unversioned, deprecated
// nvmlDeviceGet*RunningProcesses), v2 (the _v2 entry points) and the
// current nvmlProcessInfo_t of the _v3 entry points, which has v2's members.
typedef struct nvmlProcessInfo_v1_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct nvmlProcessInfo_v2_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_v2_t;

typedef struct nvmlProcessInfo_st {
    unsigned int pid;
    unsigned long long usedGpuMemory;  // NVML_VALUE_NOT_AVAILABLE_ULL when unknown
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;

typedef struct nvmlProcessUtilizationSample_st {
    unsigned int pid;
    unsigned long long timeStamp;  // CPU timestamp in microseconds
    unsigned int smUtil;
    unsigned int memUtil;
    unsigned int encUtil;
    unsigned int decUtil;
} nvmlProcessUtilizationSample_t;

typedef union nvmlValue_st {
    double dVal;
    int siVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    signed long long sllVal;
    unsigned short usVal;
} nvmlValue_t;

typedef struct nvmlFieldValue_st {
    unsigned int fieldId;
    unsigned int scopeId;
    long long timestamp;
    long long latencyUsec;
    nvmlValueType_t valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;

typedef struct nvmlEventData_st {
    nvmlDevice_t device;
    unsigned long long eventType;
    unsigned long long eventData;  // the Xid for a critical Xid error
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlEventData_t;

}  // extern "C"

// The documented layouts, member by member (LP64: unsigned long long and
// pointers are 8-aligned, so a lone unsigned int before one is padded).
static_assert(sizeof(nvmlReturn_t) == 4 && sizeof(nvmlValueType_t) == 4);
static_assert(sizeof(nvmlUtilization_t) == 2 * 4);
static_assert(sizeof(nvmlMemory_t) == 3 * 8 && offsetof(nvmlMemory_t, free) == 8 &&
              offsetof(nvmlMemory_t, used) == 16);
static_assert(offsetof(nvmlPciInfo_t, domain) == 16 && offsetof(nvmlPciInfo_t, busId) == 36 &&
              sizeof(nvmlPciInfo_t) == 68);
static_assert(sizeof(nvmlProcessInfo_v1_t) == 16 &&
              offsetof(nvmlProcessInfo_v1_t, usedGpuMemory) == 8);
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24 &&
              offsetof(nvmlProcessInfo_v2_t, gpuInstanceId) == 16 &&
              offsetof(nvmlProcessInfo_v2_t, computeInstanceId) == 20);
static_assert(sizeof(nvmlProcessInfo_t) == sizeof(nvmlProcessInfo_v2_t));
static_assert(offsetof(nvmlProcessUtilizationSample_t, timeStamp) == 8 &&
              offsetof(nvmlProcessUtilizationSample_t, smUtil) == 16 &&
              sizeof(nvmlProcessUtilizationSample_t) == 32);
static_assert(sizeof(nvmlValue_t) == 8);
static_assert(offsetof(nvmlFieldValue_t, valueType) == 24 &&
              offsetof(nvmlFieldValue_t, value) == 32 && sizeof(nvmlFieldValue_t) == 40);
static_assert(offsetof(nvmlEventData_t, eventData) == 16 &&
              offsetof(nvmlEventData_t, gpuInstanceId) == 24 && sizeof(nvmlEventData_t) == 32);

// GPU Performance Monitoring (GPM, Hopper and later), as nvml.h declares it:
// two samples taken an interval apart give per-pipe activity over it.
extern "C" {
typedef struct nvmlGpmSample_st* nvmlGpmSample_t;

typedef enum {
    NVML_GPM_METRIC_GRAPHICS_UTIL = 1,
    NVML_GPM_METRIC_SM_UTIL = 2,
    NVML_GPM_METRIC_SM_OCCUPANCY = 3,
    NVML_GPM_METRIC_INTEGER_UTIL = 4,
    NVML_GPM_METRIC_ANY_TENSOR_UTIL = 5,
    NVML_GPM_METRIC_DFMA_TENSOR_UTIL = 6,
    NVML_GPM_METRIC_HMMA_TENSOR_UTIL = 7,
    NVML_GPM_METRIC_IMMA_TENSOR_UTIL = 9,
    NVML_GPM_METRIC_DRAM_BW_UTIL = 10,
    NVML_GPM_METRIC_FP64_UTIL = 11,
    NVML_GPM_METRIC_FP32_UTIL = 12,
    NVML_GPM_METRIC_FP16_UTIL = 13
} nvmlGpmMetricId_t;

#define NVML_GPM_METRIC_MAX 98
#define NVML_GPM_METRICS_GET_VERSION 1
#define NVML_GPM_SUPPORT_VERSION 1

typedef struct {
    unsigned int metricId;  // nvmlGpmMetricId_t
    nvmlReturn_t nvmlReturn;
    double value;  // percent for the *_UTIL and occupancy metrics
    struct {
        char* shortName;
        char* longName;
        char* unit;
    } metricInfo;
} nvmlGpmMetric_t;

typedef struct {
    unsigned int version;  // NVML_GPM_METRICS_GET_VERSION
    unsigned int numMetrics;
    nvmlGpmSample_t sample1;
    nvmlGpmSample_t sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

typedef struct {
    unsigned int version;  // NVML_GPM_SUPPORT_VERSION
    unsigned int isSupportedDevice;
} nvmlGpmSupport_t;
}  // extern "C"

static_assert(offsetof(nvmlGpmMetric_t, value) == 8 &&
              offsetof(nvmlGpmMetric_t, metricInfo) == 16 && sizeof(nvmlGpmMetric_t) == 40);
static_assert(offsetof(nvmlGpmMetricsGet_t, sample1) == 8 &&
              offsetof(nvmlGpmMetricsGet_t, metrics) == 24 &&
              sizeof(nvmlGpmMetricsGet_t) == 24 + 98 * 40);
static_assert(sizeof(nvmlGpmSupport_t) == 8);
