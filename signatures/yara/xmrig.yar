/*
 * XMRig executables and config files. Strings are XMRig's own: its donation
 * hosts (src/net/strategies/DonateStrategy.cpp), option names from its usage
 * text (src/base/kernel/config/usage.h) and config.json keys.
 * Each rule is named by a signature in signatures/packs/xmrig.yaml.
 */

rule GG_XMRig_Executable
{
    meta:
        description = "XMRig miner executable (ELF or PE)"
        mitre = "T1496"
    strings:
        $donate_v2 = "donate.v2.xmrig.com" ascii
        $donate_ssl = "donate.ssl.xmrig.com" ascii
        $opt_donate = "--donate-level" ascii
        $opt_cuda = "--cuda-loader" ascii
        $randomx = "randomx" ascii nocase
        $stratum = "stratum+tcp://" ascii
        $agent = "XMRig/" ascii
    condition:
        (uint32(0) == 0x464c457f or uint16(0) == 0x5a4d) and
        (1 of ($donate_*)) and 2 of ($opt_*, $randomx, $stratum, $agent)
}

rule GG_XMRig_Config
{
    meta:
        description = "XMRig config.json"
        mitre = "T1496"
    strings:
        $donate = /"donate-level"\s*:\s*\d/
        $pools = /"pools"\s*:\s*\[/
        $cpu = /"cpu"\s*:\s*\{/
        $opencl = /"opencl"\s*:\s*\{/
        $cuda = /"cuda"\s*:\s*\{/
        $randomx = /"randomx"\s*:\s*\{/
    condition:
        filesize < 1MB and $donate and $pools and 1 of ($cpu, $opencl, $cuda, $randomx)
}
