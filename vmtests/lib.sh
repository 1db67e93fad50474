# Shared by vmtests/run.sh and vmtests/systemd.sh (sourced): logging, copying
# host programs with their libraries into an image, and Debian kernel
# packages (resolved, downloaded once into $cache, unpacked).

log() { echo "${log_prefix:-vmtests}: $*" >&2; }
die() { log "$*"; exit 2; }

# Copies a file to the same path under $1, resolving symlinks (the image is
# one flat copy, not a mirror of the host's link farm).
copy_into() {
    local root="$1" file="$2"
    mkdir -p "$root/$(dirname "$file")"
    cp -L "$file" "$root/$file"
}

# Copies an executable or library plus everything ldd says it loads (those
# already in the image are kept).
copy_with_libraries() {
    local root="$1" file="$2" lib
    copy_into "$root" "$file"
    # "libx.so => /path (addr)" and the loader's own "/lib64/ld-linux... (addr)".
    while read -r lib; do
        [[ -e $root/$lib ]] || copy_into "$root" "$lib"
    done < <(ldd "$file" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }')
}

# Prints the concrete linux-image package a name stands for: meta-packages
# (linux-image-cloud-amd64, linux-image-6.12-cloud-amd64) depend on exactly
# one linux-image-<abi>-<flavour>, which depends on no other kernel image.
resolve_package() {
    local name="$1" target
    apt-cache show "$name" >/dev/null 2>&1 || die "$name: no such package (apt-get update?)"
    target=$(apt-cache depends "$name" 2>/dev/null |
        awk '$1 ~ /Depends:$/ && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
    if [[ -z $target ]]; then
        echo "$name"
    else
        resolve_package "$target"
    fi
}

# Downloads (once, into $cache) and unpacks a package; prints the unpacked
# directory.
fetch_kernel() {
    local package="$1" debs dir
    debs=("$cache/${package}"_*.deb)
    if [[ ! -e ${debs[0]} ]]; then
        log "downloading $package"
        # apt's _apt sandbox user cannot write to a root-owned build tree.
        (cd "$cache" && apt-get download -q -o APT::Sandbox::User=root "$package" >&2)
        debs=("$cache/${package}"_*.deb)
    fi
    dir="$cache/unpacked/$package"
    if [[ ! -d $dir/boot ]]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        dpkg -x "${debs[0]}" "$dir"
    fi
    echo "$dir"
}
