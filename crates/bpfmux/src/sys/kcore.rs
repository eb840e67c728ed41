//! The running kernel's memory, read through `/proc/kcore`: an ELF core
//! file whose `PT_LOAD` segments map kernel virtual addresses (text,
//! modules, vmalloc space where BPF programs live) to file offsets.
//! Root only (CAP_SYS_RAWIO), and refused under kernel lockdown.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

const PT_LOAD: u32 = 1;

/// One loadable segment: `len` bytes at kernel address `vaddr`, stored at
/// file offset `offset`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Segment {
    vaddr: u64,
    len: u64,
    offset: u64,
}

/// An open `/proc/kcore` and its segments.
#[derive(Debug)]
pub struct Kcore {
    file: File,
    segments: Vec<Segment>,
}

impl Kcore {
    /// Opens `/proc/kcore` and reads its program headers.
    pub fn open() -> io::Result<Self> {
        Self::open_path(Path::new("/proc/kcore"))
    }

    /// Opens an ELF core file of the kernel's layout (`/proc/kcore`).
    pub fn open_path(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let mut header = [0u8; 64];
        file.read_exact_at(&mut header, 0)?;
        let (phoff, phentsize, phnum) = parse_header(&header)?;
        let mut table = vec![0u8; phentsize * phnum];
        file.read_exact_at(&mut table, phoff)?;
        let segments = table
            .chunks_exact(phentsize)
            .filter_map(parse_phdr)
            .collect();
        Ok(Self { file, segments })
    }

    /// Fills `buf` with the kernel's bytes at `addr`. The range must lie in
    /// one segment; unmapped pages inside one read as zeros (the kernel's
    /// choice for kcore).
    pub fn read(&self, addr: u64, buf: &mut [u8]) -> io::Result<()> {
        let len = buf.len() as u64;
        let seg = self
            .segments
            .iter()
            .find(|s| addr >= s.vaddr && addr.saturating_add(len) <= s.vaddr.saturating_add(s.len))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{addr:#x}+{len:#x} is in no segment of kcore"),
                )
            })?;
        self.file
            .read_exact_at(buf, seg.offset + (addr - seg.vaddr))
    }
}

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("kcore: {what}"))
}

/// Program header table offset, entry size and count of a 64-bit
/// little-endian ELF header.
fn parse_header(h: &[u8; 64]) -> io::Result<(u64, usize, usize)> {
    if &h[..4] != b"\x7fELF" {
        return Err(bad("not an ELF file"));
    }
    if h[4] != 2 || h[5] != 1 {
        return Err(bad("not 64-bit little-endian"));
    }
    let phoff = u64::from_le_bytes(h[0x20..0x28].try_into().map_err(|_| bad("header"))?);
    let phentsize = usize::from(u16::from_le_bytes([h[0x36], h[0x37]]));
    let phnum = usize::from(u16::from_le_bytes([h[0x38], h[0x39]]));
    if phentsize < 56 || phnum == 0 || phnum == 0xffff {
        return Err(bad("unexpected program header table"));
    }
    Ok((phoff, phentsize, phnum))
}

fn parse_phdr(p: &[u8]) -> Option<Segment> {
    let u64_at = |o: usize| Some(u64::from_le_bytes(p.get(o..o + 8)?.try_into().ok()?));
    let ty = u32::from_le_bytes(p.get(0..4)?.try_into().ok()?);
    (ty == PT_LOAD).then_some(())?;
    Some(Segment {
        offset: u64_at(8)?,
        vaddr: u64_at(16)?,
        len: u64_at(32)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A core file with one segment of `data` at `vaddr`.
    fn core_file(vaddr: u64, data: &[u8]) -> tempfile_path::Temp {
        let mut f = Vec::new();
        let mut h = [0u8; 64];
        h[..4].copy_from_slice(b"\x7fELF");
        h[4] = 2;
        h[5] = 1;
        h[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        h[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        h[0x38..0x3a].copy_from_slice(&2u16.to_le_bytes());
        f.extend_from_slice(&h);
        // A PT_NOTE, then the PT_LOAD.
        let mut note = [0u8; 56];
        note[0..4].copy_from_slice(&4u32.to_le_bytes());
        f.extend_from_slice(&note);
        let mut load = [0u8; 56];
        load[0..4].copy_from_slice(&PT_LOAD.to_le_bytes());
        let offset = 64 + 2 * 56;
        load[8..16].copy_from_slice(&(offset as u64).to_le_bytes());
        load[16..24].copy_from_slice(&vaddr.to_le_bytes());
        load[32..40].copy_from_slice(&(data.len() as u64).to_le_bytes());
        f.extend_from_slice(&load);
        f.extend_from_slice(data);
        tempfile_path::Temp::with(&f)
    }

    mod tempfile_path {
        use super::*;
        pub struct Temp(pub std::path::PathBuf);
        impl Temp {
            pub fn with(bytes: &[u8]) -> Self {
                static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
                let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let p =
                    std::env::temp_dir().join(format!("bpfmux-kcore-{}-{n}", std::process::id()));
                let mut f = File::create(&p).expect("temp file");
                f.write_all(bytes).expect("write temp file");
                Self(p)
            }
        }
        impl Drop for Temp {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
    }

    #[test]
    fn reads_inside_a_segment_only() {
        let data: Vec<u8> = (0..=255).collect();
        let t = core_file(0xffff_ffff_8100_0000, &data);
        let k = Kcore::open_path(&t.0).expect("parse");
        let mut buf = [0u8; 4];
        k.read(0xffff_ffff_8100_0010, &mut buf).expect("inside");
        assert_eq!(buf, [16, 17, 18, 19]);
        assert!(
            k.read(0xffff_ffff_8100_00fe, &mut buf).is_err(),
            "crosses the end"
        );
        assert!(
            k.read(0xffff_ffff_80ff_ffff, &mut buf).is_err(),
            "before the start"
        );
    }

    #[test]
    fn refuses_what_is_not_a_64_bit_core() {
        let t = tempfile_path::Temp::with(&[0u8; 64]);
        let e = Kcore::open_path(&t.0).expect_err("no ELF magic");
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }
}
