# Unity builds: each target's C++ sources compiled in batches, one
# translation unit per batch, so the heavy headers (nlohmann, spdlog, gtest,
# yaml-cpp, <regex>) are parsed once per batch instead of once per file. On
# two cores this halves a cold build (docs/building.md#unity-builds).
#
# CMake's own UNITY_BUILD (3.25) includes each source by its absolute path,
# which puts the clone's directory into the preprocessed text: a second
# clone elsewhere would miss every ccache entry the first one filled. Here
# each batch file includes its sources by paths relative to itself, so the
# compiler (given relative paths by ccache's base_dir) sees the same text in
# every clone. A source's own quoted includes still resolve against its own
# directory, as the preprocessor looks there first.
#
# Left out of batches: generated sources (their rule must run first), C
# sources, and single-source targets. A source that cannot share a unit sets
# the source property GPUGUARD_UNITY_SKIP.
option(GPUGUARD_UNITY_BUILD "Compile each target's sources in batches (unity build)" ON)
set(GPUGUARD_UNITY_BATCH_SIZE 8 CACHE STRING "C++ sources per unity translation unit")

# gpuguard_unity_target(<target>): replaces the target's .cpp sources by
# batch files under its binary directory.
function(gpuguard_unity_target target)
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY)$")
        return()
    endif()
    get_target_property(sources ${target} SOURCES)
    get_target_property(source_dir ${target} SOURCE_DIR)
    get_target_property(binary_dir ${target} BINARY_DIR)
    set(batchable "")
    set(kept "")
    foreach(source IN LISTS sources)
        get_filename_component(absolute "${source}" ABSOLUTE BASE_DIR "${source_dir}")
        get_source_file_property(generated "${absolute}" TARGET_DIRECTORY ${target} GENERATED)
        get_source_file_property(skip "${absolute}" TARGET_DIRECTORY ${target} GPUGUARD_UNITY_SKIP)
        if(source MATCHES "\\.cpp$" AND NOT generated AND NOT skip AND NOT source MATCHES "^\\$<")
            list(APPEND batchable "${absolute}")
        else()
            list(APPEND kept "${source}")
        endif()
    endforeach()
    list(LENGTH batchable count)
    if(count LESS 2)
        return()
    endif()
    set(unity_dir "${binary_dir}/unity/${target}")
    set(batch_sources "")
    set(batch 0)
    set(in_batch 0)
    set(content "")
    foreach(absolute IN LISTS batchable)
        file(RELATIVE_PATH relative "${unity_dir}" "${absolute}")
        string(APPEND content "#include \"${relative}\"\n")
        math(EXPR in_batch "${in_batch} + 1")
        if(in_batch EQUAL GPUGUARD_UNITY_BATCH_SIZE)
            file(CONFIGURE OUTPUT "${unity_dir}/unity_${batch}.cpp" CONTENT "${content}")
            list(APPEND batch_sources "${unity_dir}/unity_${batch}.cpp")
            math(EXPR batch "${batch} + 1")
            set(in_batch 0)
            set(content "")
        endif()
    endforeach()
    if(in_batch GREATER 0)
        file(CONFIGURE OUTPUT "${unity_dir}/unity_${batch}.cpp" CONTENT "${content}")
        list(APPEND batch_sources "${unity_dir}/unity_${batch}.cpp")
    endif()
    set_property(TARGET ${target} PROPERTY SOURCES ${kept} ${batch_sources})
    # GCC takes a class defined in an included .cpp for a header's, and warns
    # when it holds a type from that file's anonymous namespace (a pimpl's
    # Impl does): true of headers, not of sources compiled together.
    target_compile_options(${target} PRIVATE $<$<CXX_COMPILER_ID:GNU>:-Wno-subobject-linkage>)
endfunction()

# gpuguard_unity_directory(<dir>): every target defined in <dir> and below.
function(gpuguard_unity_directory dir)
    get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
    foreach(target IN LISTS targets)
        gpuguard_unity_target(${target})
    endforeach()
    get_property(subdirectories DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
    foreach(subdirectory IN LISTS subdirectories)
        gpuguard_unity_directory("${subdirectory}")
    endforeach()
endfunction()
