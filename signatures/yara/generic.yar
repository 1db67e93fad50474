/*
 * Generic executable traits that raise the weight of other evidence.
 */

rule GG_UPX_Packed_ELF
{
    meta:
        description = "ELF executable packed with UPX (the UPX! marker in the first kilobyte)"
        mitre = "T1027.002"
    strings:
        $upx = "UPX!" ascii
    condition:
        uint32(0) == 0x464c457f and $upx in (0..1024)
}
