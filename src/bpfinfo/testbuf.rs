//! Test-only builders of the byte layouts we parse: `perf_bpil` entries of feature 25, the
//! feature 26 section, and BTF blobs, in either byte order, plus a two-function sample
//! program with its BTF.

/// Bytes in a chosen byte order.
pub(crate) struct Out {
    pub buf: Vec<u8>,
    pub le: bool,
}

impl Out {
    pub fn new(le: bool) -> Out {
        Out {
            buf: Vec::new(),
            le,
        }
    }
    pub fn u16(&mut self, v: u16) {
        let b = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    pub fn u32(&mut self, v: u32) {
        let b = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    pub fn u64(&mut self, v: u64) {
        let b = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        self.buf.extend_from_slice(&b);
    }
    pub fn set_u32(&mut self, at: usize, v: u32) {
        let b = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        self.buf[at..at + 4].copy_from_slice(&b);
    }
    pub fn set_u64(&mut self, at: usize, v: u64) {
        let b = if self.le {
            v.to_le_bytes()
        } else {
            v.to_be_bytes()
        };
        self.buf[at..at + 8].copy_from_slice(&b);
    }
    fn pad8(&mut self) {
        while self.buf.len() % 8 != 0 {
            self.buf.push(0);
        }
    }
}

/// Little-endian helpers on a plain buffer, for corrupting built sections.
pub(crate) fn put_u32(buf: &mut [u8], at: usize, v: u32) {
    buf[at..at + 4].copy_from_slice(&v.to_le_bytes());
}
pub(crate) fn put_u64(buf: &mut [u8], at: usize, v: u64) {
    buf[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

/// Offset of `bpf_prog_info` field `field` of the first entry of a built section.
pub(crate) const fn info_at(field: usize) -> usize {
    4 + 16 + field
}

/// What goes into one `perf_bpil` entry.
#[derive(Clone)]
pub(crate) struct ProgBuf {
    pub id: u32,
    pub btf_id: u32,
    pub name: &'static str,
    pub tag: [u8; 8],
    pub load_time: u64,
    pub info_len: u32,
    pub ksyms: Vec<u64>,
    pub lens: Vec<u32>,
    pub tags: Vec<[u8; 8]>,
    pub func_info: Vec<(u32, u32)>,
    pub line_info: Vec<[u32; 4]>,
    pub jited_line_info: Vec<u64>,
    pub insns: Vec<u8>,
}

impl ProgBuf {
    /// The entry bytes, arrays in `bpil_array_desc` order with perf 6.1's bitmask 0x1f9.
    pub fn entry(&self, le: bool) -> Vec<u8> {
        let mut data = Out::new(le);
        let mut ptrs = [0u64; 9];
        ptrs[0] = data.buf.len() as u64;
        data.buf.extend_from_slice(&self.insns);
        data.pad8();
        ptrs[3] = data.buf.len() as u64;
        self.ksyms.iter().for_each(|&k| data.u64(k));
        ptrs[4] = data.buf.len() as u64;
        self.lens.iter().for_each(|&l| data.u32(l));
        data.pad8();
        ptrs[5] = data.buf.len() as u64;
        self.func_info.iter().for_each(|&(o, t)| {
            data.u32(o);
            data.u32(t)
        });
        ptrs[6] = data.buf.len() as u64;
        self.line_info.iter().flatten().for_each(|&v| data.u32(v));
        ptrs[7] = data.buf.len() as u64;
        self.jited_line_info.iter().for_each(|&a| data.u64(a));
        ptrs[8] = data.buf.len() as u64;
        self.tags.iter().for_each(|t| data.buf.extend_from_slice(t));
        let mut out = Out::new(le);
        out.u32(self.info_len);
        out.u32(data.buf.len() as u32);
        out.u64(0x1f9);
        out.buf.extend(self.info(le, &ptrs));
        out.buf.extend(data.buf);
        out.buf
    }

    fn info(&self, le: bool, ptrs: &[u64; 9]) -> Vec<u8> {
        let mut i = Out::new(le);
        i.buf = vec![0; (self.info_len as usize).max(232)];
        i.set_u32(0, 26); // BPF_PROG_TYPE_TRACING
        i.set_u32(4, self.id);
        i.buf[8..16].copy_from_slice(&self.tag);
        i.set_u32(16, self.insns.len() as u32);
        i.set_u32(20, 999); // xlated_prog_len: counted, never stored
        i.set_u64(24, ptrs[0]);
        i.set_u64(40, self.load_time);
        i.buf[64..64 + self.name.len()].copy_from_slice(self.name.as_bytes());
        i.set_u32(104, self.ksyms.len() as u32);
        i.set_u32(108, self.lens.len() as u32);
        i.set_u64(112, ptrs[3]);
        i.set_u64(120, ptrs[4]);
        i.set_u32(128, self.btf_id);
        i.set_u32(132, 8);
        i.set_u64(136, ptrs[5]);
        i.set_u32(144, self.func_info.len() as u32);
        i.set_u32(148, self.line_info.len() as u32);
        i.set_u64(152, ptrs[6]);
        i.set_u64(160, ptrs[7]);
        i.set_u32(168, self.jited_line_info.len() as u32);
        i.set_u32(172, 16);
        i.set_u32(176, 8);
        i.set_u32(180, self.tags.len() as u32);
        i.set_u64(184, ptrs[8]);
        i.buf.truncate(self.info_len as usize);
        i.buf
    }
}

/// A feature 25 section of these entries.
pub(crate) fn prog_section(progs: &[ProgBuf], le: bool) -> Vec<u8> {
    let mut out = Out::new(le);
    out.u32(progs.len() as u32);
    for p in progs {
        out.buf.extend(p.entry(le));
    }
    out.buf
}

/// A BTF blob under construction.
pub(crate) struct BtfBuf {
    types: Out,
    strings: Vec<u8>,
    next_id: u32,
}

impl BtfBuf {
    pub fn new(le: bool) -> BtfBuf {
        BtfBuf {
            types: Out::new(le),
            strings: vec![0],
            next_id: 1,
        }
    }
    pub fn str(&mut self, s: &str) -> u32 {
        let off = self.strings.len() as u32;
        self.strings.extend_from_slice(s.as_bytes());
        self.strings.push(0);
        off
    }
    /// A type of `kind` with `vlen`, then `trailing` u32 words; returns its id.
    pub fn ty(&mut self, kind: u32, name_off: u32, vlen: u32, size: u32, trailing: &[u32]) -> u32 {
        self.types.u32(name_off);
        self.types.u32((kind << 24) | vlen);
        self.types.u32(size);
        trailing.iter().for_each(|&w| self.types.u32(w));
        self.next_id += 1;
        self.next_id - 1
    }
    pub fn blob(&self) -> Vec<u8> {
        let mut out = Out::new(self.types.le);
        out.u16(0xeb9f);
        out.buf.extend_from_slice(&[1, 0]);
        out.u32(24);
        out.u32(0);
        out.u32(self.types.buf.len() as u32);
        out.u32(self.types.buf.len() as u32);
        out.u32(self.strings.len() as u32);
        out.buf.extend_from_slice(&self.types.buf);
        out.buf.extend_from_slice(&self.strings);
        out.buf
    }
}

/// A feature 26 section of `(id, blob)` pairs.
pub(crate) fn btf_section(blobs: &[(u32, Vec<u8>)], le: bool) -> Vec<u8> {
    let mut out = Out::new(le);
    out.u32(blobs.len() as u32);
    for (id, blob) in blobs {
        out.u32(*id);
        out.u32(blob.len() as u32);
        out.buf.extend_from_slice(blob);
    }
    out.buf
}

pub(crate) const BASE: u64 = 0xffff_ffff_c000_1000;
pub(crate) const SUB: u64 = 0xffff_ffff_c000_2000;

/// BTF of the sample program: INT, FUNC_PROTO, FUNC `main_fn` (3), FUNC `sub_fn` (4), the
/// file name and four source lines. Returns the blob and the string offsets
/// `[file, line 5, line 6, line 20, line 21]`.
pub(crate) fn sample_btf(le: bool) -> (Vec<u8>, [u32; 5]) {
    let mut b = BtfBuf::new(le);
    let int = b.str("int");
    b.ty(1, int, 0, 4, &[32]);
    b.ty(13, 0, 1, 1, &[0, 1]);
    let main = b.str("main_fn");
    b.ty(12, main, 0, 2, &[]);
    let sub = b.str("sub_fn");
    b.ty(12, sub, 0, 2, &[]);
    let offs = [
        b.str("/src/hook.bpf.c"),
        b.str("int main_fn(void *ctx)"),
        b.str("\treturn sub_fn(ctx);"),
        b.str("static int sub_fn(void *p)"),
        b.str("\treturn bpf_probe_read_user_str(buf, 128, p);"),
    ];
    (b.blob(), offs)
}

/// Program 42: `main_fn` at [`BASE`] (0x40 bytes, lines 5 and 6) calling `sub_fn` at [`SUB`]
/// (0x80 bytes, lines 20 and 21), BTF id 7.
pub(crate) fn sample_prog(strs: [u32; 5]) -> ProgBuf {
    let [file, l5, l6, l20, l21] = strs;
    ProgBuf {
        id: 42,
        btf_id: 7,
        name: "main_fn",
        tag: [0xaa; 8],
        load_time: 1_000,
        info_len: 232,
        ksyms: vec![BASE, SUB],
        lens: vec![0x40, 0x80],
        tags: vec![[0x11; 8], [0x22; 8]],
        func_info: vec![(0, 3), (10, 4)],
        line_info: vec![
            [0, file, l5, 5 << 10 | 1],
            [3, file, l6, 6 << 10 | 2],
            [10, file, l20, 20 << 10 | 1],
            [12, file, l21, 21 << 10 | 9],
        ],
        jited_line_info: vec![BASE, BASE + 0x10, SUB, SUB + 0x20],
        insns: vec![0x90; 0xc0],
    }
}
