/// The two kernels that turn a decoder's NV12 surface into the planar 4:2:0 picture nvJPEG
/// encodes, each sample passed through a 256-entry table on the way: the identity for a
/// full-range picture, `RangeExpansion.luma`/`.chroma` for a limited-range one, so the GPU's
/// samples are the very bytes the CPU encoder would compress. Hand-written PTX (ISA 7.0,
/// sm_52, JIT-compiled by the driver for the card at hand): the binary needs no CUDA toolkit.
///
/// One thread per output sample (luma) or per chroma pair; every parameter is a 64-bit word,
/// so the launch passes an array of UInt64 and no layout can disagree.
///
/// `frametap_map_plane(source, sourcePitch, output, outputPitch, table, width, rows)`
/// `frametap_split_chroma(source, sourcePitch, outputU, outputV, outputPitch, table, width, rows)`
/// (`width`: chroma samples per row, i.e. pairs).
enum RangeKernels {
    static let mapPlane = "frametap_map_plane"
    static let splitChroma = "frametap_split_chroma"
    /// Threads per block in x and y.
    static let blockWidth = 32
    static let blockHeight = 8

    static let ptx = """
        .version 7.0
        .target sm_52
        .address_size 64

        .visible .entry frametap_map_plane(
            .param .u64 p_source,
            .param .u64 p_source_pitch,
            .param .u64 p_output,
            .param .u64 p_output_pitch,
            .param .u64 p_table,
            .param .u64 p_width,
            .param .u64 p_rows
        )
        {
            .reg .pred %p<4>;
            .reg .b32 %r<12>;
            .reg .b64 %rd<24>;

            ld.param.u64 %rd1, [p_source];
            ld.param.u64 %rd2, [p_source_pitch];
            ld.param.u64 %rd3, [p_output];
            ld.param.u64 %rd4, [p_output_pitch];
            ld.param.u64 %rd5, [p_table];
            ld.param.u64 %rd6, [p_width];
            ld.param.u64 %rd7, [p_rows];
            mov.u32 %r1, %ctaid.x;
            mov.u32 %r2, %ntid.x;
            mov.u32 %r3, %tid.x;
            mad.lo.u32 %r4, %r1, %r2, %r3;
            mov.u32 %r5, %ctaid.y;
            mov.u32 %r6, %ntid.y;
            mov.u32 %r7, %tid.y;
            mad.lo.u32 %r8, %r5, %r6, %r7;
            cvt.u64.u32 %rd8, %r4;
            cvt.u64.u32 %rd9, %r8;
            setp.ge.u64 %p1, %rd8, %rd6;
            setp.ge.u64 %p2, %rd9, %rd7;
            or.pred %p3, %p1, %p2;
            @%p3 bra DONE;
            cvta.to.global.u64 %rd10, %rd1;
            cvta.to.global.u64 %rd11, %rd3;
            cvta.to.global.u64 %rd12, %rd5;
            mad.lo.u64 %rd13, %rd9, %rd2, %rd10;
            add.u64 %rd14, %rd13, %rd8;
            ld.global.u8 %r9, [%rd14];
            cvt.u64.u32 %rd15, %r9;
            add.u64 %rd16, %rd12, %rd15;
            ld.global.u8 %r10, [%rd16];
            mad.lo.u64 %rd17, %rd9, %rd4, %rd11;
            add.u64 %rd18, %rd17, %rd8;
            st.global.u8 [%rd18], %r10;
        DONE:
            ret;
        }

        .visible .entry frametap_split_chroma(
            .param .u64 p_source,
            .param .u64 p_source_pitch,
            .param .u64 p_output_u,
            .param .u64 p_output_v,
            .param .u64 p_output_pitch,
            .param .u64 p_table,
            .param .u64 p_width,
            .param .u64 p_rows
        )
        {
            .reg .pred %p<4>;
            .reg .b32 %r<16>;
            .reg .b64 %rd<32>;

            ld.param.u64 %rd1, [p_source];
            ld.param.u64 %rd2, [p_source_pitch];
            ld.param.u64 %rd3, [p_output_u];
            ld.param.u64 %rd4, [p_output_v];
            ld.param.u64 %rd5, [p_output_pitch];
            ld.param.u64 %rd6, [p_table];
            ld.param.u64 %rd7, [p_width];
            ld.param.u64 %rd8, [p_rows];
            mov.u32 %r1, %ctaid.x;
            mov.u32 %r2, %ntid.x;
            mov.u32 %r3, %tid.x;
            mad.lo.u32 %r4, %r1, %r2, %r3;
            mov.u32 %r5, %ctaid.y;
            mov.u32 %r6, %ntid.y;
            mov.u32 %r7, %tid.y;
            mad.lo.u32 %r8, %r5, %r6, %r7;
            cvt.u64.u32 %rd9, %r4;
            cvt.u64.u32 %rd10, %r8;
            setp.ge.u64 %p1, %rd9, %rd7;
            setp.ge.u64 %p2, %rd10, %rd8;
            or.pred %p3, %p1, %p2;
            @%p3 bra DONE;
            cvta.to.global.u64 %rd11, %rd1;
            cvta.to.global.u64 %rd12, %rd3;
            cvta.to.global.u64 %rd13, %rd4;
            cvta.to.global.u64 %rd14, %rd6;
            mad.lo.u64 %rd15, %rd10, %rd2, %rd11;
            shl.b64 %rd16, %rd9, 1;
            add.u64 %rd17, %rd15, %rd16;
            ld.global.u8 %r9, [%rd17];
            ld.global.u8 %r10, [%rd17+1];
            cvt.u64.u32 %rd18, %r9;
            cvt.u64.u32 %rd19, %r10;
            add.u64 %rd20, %rd14, %rd18;
            add.u64 %rd21, %rd14, %rd19;
            ld.global.u8 %r11, [%rd20];
            ld.global.u8 %r12, [%rd21];
            mad.lo.u64 %rd22, %rd10, %rd5, %rd9;
            add.u64 %rd23, %rd12, %rd22;
            add.u64 %rd24, %rd13, %rd22;
            st.global.u8 [%rd23], %r11;
            st.global.u8 [%rd24], %r12;
        DONE:
            ret;
        }
        """
}
