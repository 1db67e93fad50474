/*
 * Miner executables and configs beyond XMRig. Strings are the miners' own
 * option names, URL schemes and protocol methods (see the references of the
 * signatures naming each rule in signatures/packs/*.yaml).
 */

rule GG_Ethminer_Executable
{
    meta:
        description = "ethminer (or a fork) executable"
        mitre = "T1496"
    strings:
        $name = "ethminer" ascii
        $scheme = "stratum1+tcp" ascii
        $opt_recheck = "--farm-recheck" ascii
        $opt_grid = "--cu-grid-size" ascii
        $method = "eth_submitWork" ascii
    condition:
        (uint32(0) == 0x464c457f or uint16(0) == 0x5a4d) and $name and 2 of ($scheme, $opt_*, $method)
}

rule GG_CPUMiner_Executable
{
    meta:
        description = "cpuminer/minerd executable"
        mitre = "T1496"
    strings:
        $userpass = "--userpass" ascii
        $coinbase = "--coinbase-addr" ascii
        $subscribe = "mining.subscribe" ascii
        $scheme = "stratum+tcp://" ascii
    condition:
        (uint32(0) == 0x464c457f or uint16(0) == 0x5a4d) and $userpass and $coinbase and ($subscribe or $scheme)
}

rule GG_Stratum_Client_Executable
{
    meta:
        description = "Executable speaking the stratum mining protocol (any miner family)"
        mitre = "T1496"
    strings:
        $m1 = "mining.subscribe" ascii
        $m2 = "mining.authorize" ascii
        $m3 = "mining.submit" ascii
        $m4 = "mining.notify" ascii
        $m5 = "mining.set_difficulty" ascii
        $m6 = "eth_submitLogin" ascii
        $m7 = "eth_submitWork" ascii
    condition:
        (uint32(0) == 0x464c457f or uint16(0) == 0x5a4d) and 3 of ($m*)
}

rule GG_Miner_Pool_Config
{
    meta:
        description = "Miner configuration pairing a stratum URL with a wallet or user"
        mitre = "T1496"
    strings:
        $url_json = /"(url|pool|pool_address)"\s*:\s*"stratum\+(tcp|ssl|tls):\/\// nocase
        $url_any = /stratum[12]?\+(tcp|ssl|tls):\/\/[a-z0-9.\-]+:[0-9]{2,5}/ nocase
        $user_json = /"(user|wallet|login|wallet_address)"\s*:\s*"[^"]{2,}"/
        $user_ini = /(^|\n)\s*(user|wallet)\s*=\s*\S{2,}/
    condition:
        filesize < 1MB and uint32(0) != 0x464c457f and ($url_json or $url_any) and ($user_json or $user_ini)
}
