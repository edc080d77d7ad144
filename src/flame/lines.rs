//! `flame --lines`: a frame per BPF source line (`hook.bpf.c:42`) under each BPF frame, so
//! the graph shows which line of the program its time (and its helpers' time) belongs to.
//!
//! Done on `perf script`'s text on its way to the collapser: before each call-chain line of a
//! BPF frame, one more line is inserted for the source line its address maps to (the sample
//! IP for the innermost entry, the return address − 1 for callers, as `annotate` does), so
//! it sits between the BPF frame and what the frame called. Program info comes from the
//! perf.data header ([`crate::bpfinfo::annotate::load_info`]).

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use anyhow::Result;

use crate::bpfinfo::annotate::build::basename;
use crate::bpfinfo::{BpfInfo, IpKind};
use crate::perf::PerfChoice;
use crate::profile::Profile;

/// The profile with a line frame under each BPF frame; perf.data input only. The built-in
/// reader adds the frames as it folds; through perf (`--via-perf`, or a file it does not
/// read) they are inserted into perf script's text.
pub fn load(input: &Path, kallsyms: Option<&Path>, perf: &PerfChoice) -> Result<Profile> {
    let (info, _) = crate::bpfinfo::annotate::load_info(input)?;
    let rewrite = rewriter(&info);
    let decorate = |ip: u64, depth: usize, sym: Option<&str>, prog: Option<u32>| {
        line_name(&info, ip, depth, sym, prog)
    };
    let programs = info.programs();
    crate::profile::load_with_lines(input, kallsyms, perf, &rewrite, (&decorate, programs))
}

/// The source line (`hook.bpf.c:42`, `hook.bpf.c:?`) of call-chain entry `depth` at `ip`, if
/// a known BPF function with line info holds it: the sample IP for the innermost entry, the
/// return address − 1 for callers, as `annotate` looks them up (among overlapping programs,
/// the frame's program `prog` when the reader named it, else by `sym`).
fn line_name(
    info: &BpfInfo,
    ip: u64,
    depth: usize,
    sym: Option<&str>,
    prog: Option<u32>,
) -> Option<String> {
    let kind = match depth {
        0 => IpKind::Sample,
        _ => IpKind::Return,
    };
    let hints = crate::bpfinfo::FrameHints {
        name: sym,
        prog,
        time: None,
    };
    let line = info.lookup_hinted(ip, kind, hints)?.line?;
    let file = basename(&line.file);
    let file = if file.is_empty() { "?" } else { file };
    Some(format!("{file}:{}", line.line))
}

fn rewriter<'a>(info: &'a BpfInfo) -> impl Fn(Box<dyn Read + 'a>) -> Box<dyn Read + 'a> + 'a {
    move |r| Box::new(WithLines::new(BufReader::new(r), info))
}

/// Whether a folded frame is one `--lines` inserted (`hook.bpf.c:42`, `common.h:?`): drawn in
/// the BPF colour.
pub(crate) fn is_line_frame(frame: &str) -> bool {
    frame.rsplit_once(':').is_some_and(|(file, line)| {
        (file.ends_with(".c") || file.ends_with(".h"))
            && !file.contains(';')
            && (line == "?" || line.bytes().all(|b| b.is_ascii_digit()) && !line.is_empty())
    })
}

/// `perf script` text with source-line frames inserted.
pub(crate) struct WithLines<'a, R> {
    inner: R,
    info: &'a BpfInfo,
    line: String,
    out: Vec<u8>,
    pos: usize,
    /// Index of the next call-chain entry of the current sample.
    depth: usize,
}

impl<'a, R: BufRead> WithLines<'a, R> {
    /// Wrap `inner`.
    pub fn new(inner: R, info: &'a BpfInfo) -> Self {
        WithLines {
            inner,
            info,
            line: String::new(),
            out: Vec::new(),
            pos: 0,
            depth: 0,
        }
    }

    /// The inserted line for a call-chain line, if it is a BPF frame with a source line.
    fn line_frame(&self, text: &str) -> Option<String> {
        let body = text.trim_start();
        let (hex, rest) = body.split_once(' ')?;
        let ip = u64::from_str_radix(hex, 16).ok()?;
        let sym = rest.split(['+', ' ']).next();
        let name = line_name(self.info, ip, self.depth, sym, None)?;
        Some(format!("\t{hex} {name} (bpf-source)\n"))
    }

    /// Reads one line into `out`; false at the end.
    fn refill(&mut self) -> std::io::Result<bool> {
        self.line.clear();
        self.out.clear();
        self.pos = 0;
        if self.inner.read_line(&mut self.line)? == 0 {
            return Ok(false);
        }
        if self.line.starts_with([' ', '\t']) && !self.line.trim().is_empty() {
            if let Some(extra) = self.line_frame(&self.line) {
                self.out.extend_from_slice(extra.as_bytes());
            }
            self.depth += 1;
        } else {
            self.depth = 0;
        }
        self.out.extend_from_slice(self.line.as_bytes());
        Ok(true)
    }
}

impl<R: BufRead> Read for WithLines<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.out.len() && !self.refill()? {
            return Ok(0);
        }
        let count = buf.len().min(self.out.len() - self.pos);
        buf[..count].copy_from_slice(&self.out[self.pos..self.pos + count]);
        self.pos += count;
        Ok(count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_frames_are_told_apart() {
        assert!(is_line_frame("openat_hook_common.h:99"));
        assert!(is_line_frame("hook.bpf.c:?"));
        assert!(!is_line_frame("vfs_open_[k]"));
        assert!(!is_line_frame("foo.c:"));
        assert!(!is_line_frame("a.rs:3"));
    }

    #[test]
    fn a_line_frame_goes_before_each_bpf_frame() {
        let info = BpfInfo::default();
        let text = "x 1 1.0: 1 cpu-clock:\n\tffffffff81000000 f+0x1 ([kernel.kallsyms])\n\n";
        let mut out = String::new();
        WithLines::new(text.as_bytes(), &info)
            .read_to_string(&mut out)
            .unwrap();
        assert_eq!(out, text, "nothing to add without BPF frames");
    }
}
