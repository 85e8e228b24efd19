/// The kernels that turn a decoder's NV12 surface into the planar 4:2:0 picture nvJPEG encodes,
/// with JPEG's samples (BT.601, full range), so the GPU's samples are the very bytes the CPU
/// encoder would compress:
/// - a BT.601 picture has each sample passed through a 256-entry table on the way: the identity
///   for full range, `RangeExpansion.luma`/`.chroma` for limited range (`mapPlane`,
///   `splitChroma`);
/// - a picture of another matrix is converted with `JPEGColor`'s fixed-point coefficients, which
///   carry its range, exactly as `ft_ycbcr_to_jpeg` does on the CPU (`matrixLuma`,
///   `matrixChroma`).
///
/// Hand-written PTX (ISA 7.0, sm_52, JIT-compiled by the driver for the card at hand): the
/// binary needs no CUDA toolkit. One thread per output sample (luma) or per chroma pair; every
/// parameter is a 64-bit word, so the launch passes an array of UInt64 and no layout can
/// disagree (a signed coefficient travels as its two's complement, and the kernel reads its low
/// 32 bits).
///
/// `frametap_map_plane(source, sourcePitch, output, outputPitch, table, width, rows)`
/// `frametap_split_chroma(source, sourcePitch, outputU, outputV, outputPitch, table, width, rows)`
/// `frametap_matrix_luma(luma, lumaPitch, chroma, chromaPitch, output, outputPitch, yFromY, yFromCb,
///     yFromCr, lumaOffset, width, rows)`
/// `frametap_matrix_chroma(source, sourcePitch, outputU, outputV, outputPitch, cbFromCb, cbFromCr,
///     crFromCb, crFromCr, width, rows)`
/// (`width` of the chroma kernels: chroma samples per row, i.e. pairs).
enum JPEGInputKernels {
    static let mapPlane = "frametap_map_plane"
    static let splitChroma = "frametap_split_chroma"
    static let matrixLuma = "frametap_matrix_luma"
    static let matrixChroma = "frametap_matrix_chroma"
    static let functions = [mapPlane, splitChroma, matrixLuma, matrixChroma]
    /// Threads per block in x and y.
    static let blockWidth = 32
    static let blockHeight = 8

    /// The tables `mapPlane` and `splitChroma` read, one after another on the device: the
    /// identity, limited-to-full luma, limited-to-full chroma.
    static let tables: [UInt8] = (0..<256).map { UInt8($0) } + RangeExpansion.luma + RangeExpansion.chroma

    /// Where an NV12 picture's visible samples are on the device.
    struct NV12Picture {
        let luma: UInt64
        let lumaPitch: Int
        let chroma: UInt64
        let chromaPitch: Int
        let width: Int
        let height: Int
    }

    /// Where the planar 4:2:0 picture goes: Y rows, then U rows, then V rows, one pitch.
    struct PlanarPicture {
        let base: UInt64
        let pitch: Int

        /// Where its three planes start, for a picture `height` rows high.
        func planes(height: Int) -> (y: UInt64, u: UInt64, v: UInt64) {
            let u = base + UInt64(pitch * height)
            return (base, u, u + UInt64(pitch * ((height + 1) / 2)))
        }
    }

    /// One launch: a function over `columns`×`rows` threads (rounded up to whole blocks; the
    /// kernels leave the threads outside alone).
    struct Launch: Equatable {
        let function: String
        let columns: Int
        let rows: Int
        let arguments: [UInt64]
    }

    /// The launches that write `output` from `source`, its samples mapped as `mapping` says;
    /// `tables` is the device address of `tables`' bytes.
    static func launches(
        from source: NV12Picture, to output: PlanarPicture, mapping: DeviceSampleMapping, tables: UInt64
    ) -> [Launch] {
        let chromaWidth = (source.width + 1) / 2
        let chromaRows = (source.height + 1) / 2
        let (_, outputU, outputV) = output.planes(height: source.height)
        switch mapping {
        case .range(let range):
            let lumaTable = range == .full ? tables : tables + 256
            let chromaTable = range == .full ? tables : tables + 512
            return [
                Launch(
                    function: mapPlane, columns: source.width, rows: source.height,
                    arguments: [
                        source.luma, UInt64(source.lumaPitch), output.base, UInt64(output.pitch), lumaTable,
                        UInt64(source.width), UInt64(source.height),
                    ]),
                Launch(
                    function: splitChroma, columns: chromaWidth, rows: chromaRows,
                    arguments: [
                        source.chroma, UInt64(source.chromaPitch), outputU, outputV, UInt64(output.pitch), chromaTable,
                        UInt64(chromaWidth), UInt64(chromaRows),
                    ]),
            ]
        case .matrix(let color):
            let m = color.coefficients.map { UInt64(bitPattern: Int64($0)) }
            return [
                Launch(
                    function: matrixLuma, columns: source.width, rows: source.height,
                    arguments: [
                        source.luma, UInt64(source.lumaPitch), source.chroma, UInt64(source.chromaPitch), output.base,
                        UInt64(output.pitch), m[0], m[1], m[2], UInt64(color.lumaOffset), UInt64(source.width),
                        UInt64(source.height),
                    ]),
                Launch(
                    function: matrixChroma, columns: chromaWidth, rows: chromaRows,
                    arguments: [
                        source.chroma, UInt64(source.chromaPitch), outputU, outputV, UInt64(output.pitch), m[3], m[4],
                        m[5], m[6], UInt64(chromaWidth), UInt64(chromaRows),
                    ]),
            ]
        }
    }

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

        .visible .entry frametap_matrix_luma(
            .param .u64 p_luma,
            .param .u64 p_luma_pitch,
            .param .u64 p_chroma,
            .param .u64 p_chroma_pitch,
            .param .u64 p_output,
            .param .u64 p_output_pitch,
            .param .u64 p_y_from_y,
            .param .u64 p_y_from_cb,
            .param .u64 p_y_from_cr,
            .param .u64 p_luma_offset,
            .param .u64 p_width,
            .param .u64 p_rows
        )
        {
            .reg .pred %p<4>;
            .reg .b32 %r<24>;
            .reg .b64 %rd<32>;

            ld.param.u64 %rd1, [p_luma];
            ld.param.u64 %rd2, [p_luma_pitch];
            ld.param.u64 %rd3, [p_chroma];
            ld.param.u64 %rd4, [p_chroma_pitch];
            ld.param.u64 %rd5, [p_output];
            ld.param.u64 %rd6, [p_output_pitch];
            ld.param.u64 %rd7, [p_y_from_y];
            ld.param.u64 %rd8, [p_y_from_cb];
            ld.param.u64 %rd9, [p_y_from_cr];
            ld.param.u64 %rd10, [p_luma_offset];
            ld.param.u64 %rd11, [p_width];
            ld.param.u64 %rd12, [p_rows];
            mov.u32 %r1, %ctaid.x;
            mov.u32 %r2, %ntid.x;
            mov.u32 %r3, %tid.x;
            mad.lo.u32 %r4, %r1, %r2, %r3;
            mov.u32 %r5, %ctaid.y;
            mov.u32 %r6, %ntid.y;
            mov.u32 %r7, %tid.y;
            mad.lo.u32 %r8, %r5, %r6, %r7;
            cvt.u64.u32 %rd13, %r4;
            cvt.u64.u32 %rd14, %r8;
            setp.ge.u64 %p1, %rd13, %rd11;
            setp.ge.u64 %p2, %rd14, %rd12;
            or.pred %p3, %p1, %p2;
            @%p3 bra DONE;
            cvta.to.global.u64 %rd15, %rd1;
            cvta.to.global.u64 %rd16, %rd3;
            cvta.to.global.u64 %rd17, %rd5;
            mad.lo.u64 %rd18, %rd14, %rd2, %rd15;
            add.u64 %rd19, %rd18, %rd13;
            ld.global.u8 %r9, [%rd19];
            shr.u64 %rd20, %rd14, 1;
            shr.u64 %rd21, %rd13, 1;
            shl.b64 %rd22, %rd21, 1;
            mad.lo.u64 %rd23, %rd20, %rd4, %rd16;
            add.u64 %rd24, %rd23, %rd22;
            ld.global.u8 %r10, [%rd24];
            ld.global.u8 %r11, [%rd24+1];
            cvt.u32.u64 %r12, %rd7;
            cvt.u32.u64 %r13, %rd8;
            cvt.u32.u64 %r14, %rd9;
            cvt.u32.u64 %r15, %rd10;
            sub.s32 %r16, %r9, %r15;
            sub.s32 %r17, %r10, 128;
            sub.s32 %r18, %r11, 128;
            mul.lo.s32 %r19, %r16, %r12;
            mad.lo.s32 %r19, %r17, %r13, %r19;
            mad.lo.s32 %r19, %r18, %r14, %r19;
            add.s32 %r19, %r19, 32768;
            shr.s32 %r20, %r19, 16;
            max.s32 %r20, %r20, 0;
            min.s32 %r20, %r20, 255;
            mad.lo.u64 %rd25, %rd14, %rd6, %rd17;
            add.u64 %rd26, %rd25, %rd13;
            st.global.u8 [%rd26], %r20;
        DONE:
            ret;
        }

        .visible .entry frametap_matrix_chroma(
            .param .u64 p_source,
            .param .u64 p_source_pitch,
            .param .u64 p_output_u,
            .param .u64 p_output_v,
            .param .u64 p_output_pitch,
            .param .u64 p_cb_from_cb,
            .param .u64 p_cb_from_cr,
            .param .u64 p_cr_from_cb,
            .param .u64 p_cr_from_cr,
            .param .u64 p_width,
            .param .u64 p_rows
        )
        {
            .reg .pred %p<4>;
            .reg .b32 %r<24>;
            .reg .b64 %rd<32>;

            ld.param.u64 %rd1, [p_source];
            ld.param.u64 %rd2, [p_source_pitch];
            ld.param.u64 %rd3, [p_output_u];
            ld.param.u64 %rd4, [p_output_v];
            ld.param.u64 %rd5, [p_output_pitch];
            ld.param.u64 %rd6, [p_cb_from_cb];
            ld.param.u64 %rd7, [p_cb_from_cr];
            ld.param.u64 %rd8, [p_cr_from_cb];
            ld.param.u64 %rd9, [p_cr_from_cr];
            ld.param.u64 %rd10, [p_width];
            ld.param.u64 %rd11, [p_rows];
            mov.u32 %r1, %ctaid.x;
            mov.u32 %r2, %ntid.x;
            mov.u32 %r3, %tid.x;
            mad.lo.u32 %r4, %r1, %r2, %r3;
            mov.u32 %r5, %ctaid.y;
            mov.u32 %r6, %ntid.y;
            mov.u32 %r7, %tid.y;
            mad.lo.u32 %r8, %r5, %r6, %r7;
            cvt.u64.u32 %rd12, %r4;
            cvt.u64.u32 %rd13, %r8;
            setp.ge.u64 %p1, %rd12, %rd10;
            setp.ge.u64 %p2, %rd13, %rd11;
            or.pred %p3, %p1, %p2;
            @%p3 bra DONE;
            cvta.to.global.u64 %rd14, %rd1;
            cvta.to.global.u64 %rd15, %rd3;
            cvta.to.global.u64 %rd16, %rd4;
            mad.lo.u64 %rd17, %rd13, %rd2, %rd14;
            shl.b64 %rd18, %rd12, 1;
            add.u64 %rd19, %rd17, %rd18;
            ld.global.u8 %r9, [%rd19];
            ld.global.u8 %r10, [%rd19+1];
            cvt.u32.u64 %r11, %rd6;
            cvt.u32.u64 %r12, %rd7;
            cvt.u32.u64 %r13, %rd8;
            cvt.u32.u64 %r14, %rd9;
            sub.s32 %r15, %r9, 128;
            sub.s32 %r16, %r10, 128;
            mul.lo.s32 %r17, %r15, %r11;
            mad.lo.s32 %r17, %r16, %r12, %r17;
            add.s32 %r17, %r17, 32768;
            shr.s32 %r17, %r17, 16;
            add.s32 %r17, %r17, 128;
            max.s32 %r17, %r17, 0;
            min.s32 %r17, %r17, 255;
            mul.lo.s32 %r18, %r15, %r13;
            mad.lo.s32 %r18, %r16, %r14, %r18;
            add.s32 %r18, %r18, 32768;
            shr.s32 %r18, %r18, 16;
            add.s32 %r18, %r18, 128;
            max.s32 %r18, %r18, 0;
            min.s32 %r18, %r18, 255;
            mad.lo.u64 %rd20, %rd13, %rd5, %rd12;
            add.u64 %rd21, %rd15, %rd20;
            add.u64 %rd22, %rd16, %rd20;
            st.global.u8 [%rd21], %r17;
            st.global.u8 [%rd22], %r18;
        DONE:
            ret;
        }
        """
}
