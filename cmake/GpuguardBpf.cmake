# gpuguard_bpf_object(NAME SOURCES a.bpf.c b.bpf.c HEADERS x.h ...)
#
# Compiles each BPF C source with clang (-g -O2 -target bpf), links them into
# one object with `bpftool gen object`, generates `<NAME>.skel.h` with
# `bpftool gen skeleton`, and exposes INTERFACE target NAME whose include
# directory holds the skeleton. vmlinux.h is dumped once from the BTF file in
# GPUGUARD_BTF_FILE (default: the running kernel's) into the build tree.

find_program(GPUGUARD_BPFTOOL bpftool PATHS /usr/sbin /sbin REQUIRED)
find_program(GPUGUARD_BPF_CLANG NAMES clang clang-16 clang-15 clang-14 REQUIRED)

set(GPUGUARD_BTF_FILE "/sys/kernel/btf/vmlinux" CACHE FILEPATH
    "BTF file vmlinux.h is generated from (another kernel's BTF for cross builds)")

if(NOT EXISTS "${GPUGUARD_BTF_FILE}")
    message(FATAL_ERROR "BTF file ${GPUGUARD_BTF_FILE} does not exist: build on a kernel with "
                        "CONFIG_DEBUG_INFO_BTF=y or pass -DGPUGUARD_BTF_FILE=<path to vmlinux BTF>")
endif()

if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|amd64|AMD64")
    set(GPUGUARD_BPF_ARCH x86)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
    set(GPUGUARD_BPF_ARCH arm64)
else()
    message(FATAL_ERROR "unsupported architecture for BPF: ${CMAKE_SYSTEM_PROCESSOR}")
endif()

set(GPUGUARD_BPF_GEN_DIR "${CMAKE_BINARY_DIR}/bpf")
set(GPUGUARD_VMLINUX_H "${GPUGUARD_BPF_GEN_DIR}/vmlinux.h")
file(MAKE_DIRECTORY "${GPUGUARD_BPF_GEN_DIR}")

add_custom_command(
    OUTPUT "${GPUGUARD_VMLINUX_H}"
    COMMAND "${GPUGUARD_BPFTOOL}" btf dump file "${GPUGUARD_BTF_FILE}" format c
            > "${GPUGUARD_VMLINUX_H}.tmp"
    COMMAND ${CMAKE_COMMAND} -E rename "${GPUGUARD_VMLINUX_H}.tmp" "${GPUGUARD_VMLINUX_H}"
    DEPENDS "${GPUGUARD_BTF_FILE}"
    COMMENT "Generating vmlinux.h from ${GPUGUARD_BTF_FILE}"
    VERBATIM)
add_custom_target(gpuguard_vmlinux_h DEPENDS "${GPUGUARD_VMLINUX_H}")

function(gpuguard_bpf_object NAME)
    cmake_parse_arguments(ARG "" "" "SOURCES;HEADERS" ${ARGN})
    set(objects "")
    foreach(src IN LISTS ARG_SOURCES)
        get_filename_component(stem "${src}" NAME_WE)
        set(abs_src "${CMAKE_CURRENT_SOURCE_DIR}/${src}")
        set(obj "${GPUGUARD_BPF_GEN_DIR}/${NAME}.${stem}.tmp.o")
        set(headers "")
        foreach(h IN LISTS ARG_HEADERS)
            list(APPEND headers "${CMAKE_CURRENT_SOURCE_DIR}/${h}")
        endforeach()
        add_custom_command(
            OUTPUT "${obj}"
            # The BTF line info names each source relative to the tree, not
            # by the clone's path: the skeleton headers that embed the
            # objects (and so the sensor's compile units) are the same bytes
            # in every clone, and ccache hits them.
            COMMAND "${GPUGUARD_BPF_CLANG}" -g -O2 -target bpf -Wall -Werror
                    "-fdebug-prefix-map=${PROJECT_SOURCE_DIR}=."
                    -D__TARGET_ARCH_${GPUGUARD_BPF_ARCH}
                    -I "${GPUGUARD_BPF_GEN_DIR}" -I "${CMAKE_CURRENT_SOURCE_DIR}"
                    -MD -MF "${obj}.d"
                    -c "${abs_src}" -o "${obj}"
            # The file for rebuilds, the target for order: vmlinux.h is made by a
            # custom command in another directory, which Ninja sees but Unix
            # Makefiles do not ("No rule to make target 'bpf/vmlinux.h'").
            DEPENDS "${abs_src}" ${headers} "${GPUGUARD_VMLINUX_H}" gpuguard_vmlinux_h
            DEPFILE "${obj}.d"
            COMMENT "BPF ${src}"
            VERBATIM)
        list(APPEND objects "${obj}")
    endforeach()

    set(linked "${GPUGUARD_BPF_GEN_DIR}/${NAME}.bpf.o")
    set(skel "${GPUGUARD_BPF_GEN_DIR}/${NAME}.skel.h")
    add_custom_command(
        OUTPUT "${linked}"
        COMMAND "${GPUGUARD_BPFTOOL}" gen object "${linked}" ${objects}
        DEPENDS ${objects}
        COMMENT "Linking BPF object ${NAME}.bpf.o"
        VERBATIM)
    add_custom_command(
        OUTPUT "${skel}"
        COMMAND "${GPUGUARD_BPFTOOL}" gen skeleton "${linked}" name "${NAME}" > "${skel}.tmp"
        COMMAND ${CMAKE_COMMAND} -E rename "${skel}.tmp" "${skel}"
        DEPENDS "${linked}"
        COMMENT "Generating BPF skeleton ${NAME}.skel.h"
        VERBATIM)
    add_custom_target(${NAME}_gen DEPENDS "${skel}")
    add_dependencies(${NAME}_gen gpuguard_vmlinux_h)
    add_library(${NAME} INTERFACE)
    add_dependencies(${NAME} ${NAME}_gen)
    target_include_directories(${NAME} INTERFACE "${GPUGUARD_BPF_GEN_DIR}")
endfunction()
