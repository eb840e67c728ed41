//! Reads an ELF file's GNU build ID from its PT_NOTE segments, with the same
//! acceptance rules as the kernel's lib/buildid.c (which PROCMAP_QUERY uses),
//! so the text-maps path reports exactly what the ioctl path does:
//! ET_EXEC/ET_DYN only, at most 256 program headers, note name "GNU",
//! type NT_GNU_BUILD_ID, 1..=20 bytes of descriptor, native byte order.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::mapping::BuildId;

const NT_GNU_BUILD_ID: u32 = 3;
const PT_NOTE: u32 = 4;
const MAX_PHDR_CNT: usize = 256;
const BUILD_ID_SIZE_MAX: usize = super::mapping::BUILD_ID_MAX;
/// A build-ID note sits in a small segment; don't read huge bogus ones.
const MAX_NOTE_SEGMENT: u64 = 1 << 20;

/// Positional reads of an ELF image: a file, or a process's memory where
/// the file is mapped ([`MappedImage`]).
pub trait ReadAt {
    /// Reads at `off`; `Ok(0)` past the end.
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize>;
}

impl ReadAt for File {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        FileExt::read_at(self, buf, off)
    }
}

/// A file's bytes as a process maps them, read through `/proc/PID/mem`:
/// for a file the reader cannot open (deleted or a memfd, without the
/// capability `map_files/` needs), where the same user may still read the
/// process's memory. Only the file ranges some mapping covers can be read;
/// the ELF header, program headers and build-ID note sit at the start of
/// the first mapping in every normal binary.
pub struct MappedImage {
    mem: File,
    /// (file offset, length, address) of each mapping of the file.
    ranges: Vec<(u64, u64, u64)>,
}

impl MappedImage {
    /// `ranges`: (file offset, start, end) of the file's mappings in `pid`.
    pub fn open(pid: u32, ranges: impl IntoIterator<Item = (u64, u64, u64)>) -> io::Result<Self> {
        let mem = File::open(format!("/proc/{pid}/mem"))?;
        let ranges = ranges
            .into_iter()
            .map(|(off, start, end)| (off, end.saturating_sub(start), start))
            .collect();
        Ok(Self { mem, ranges })
    }
}

impl ReadAt for MappedImage {
    fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<usize> {
        let Some(&(base, len, addr)) = self
            .ranges
            .iter()
            .find(|(base, len, _)| (*base..base.saturating_add(*len)).contains(&off))
        else {
            return Ok(0);
        };
        let n = buf.len().min((base + len - off) as usize);
        FileExt::read_at(&self.mem, &mut buf[..n], addr + (off - base))
    }
}

/// `Ok(None)`: not an ELF executable/shared object, or it has no build ID.
pub fn read(file: &impl ReadAt) -> io::Result<Option<BuildId>> {
    // One read covers the ELF header and, for normal binaries, the program
    // headers too.
    let mut head = [0u8; 4096];
    let n = read_at_most(file, &mut head, 0)?;
    let head = &head[..n];
    if head.len() < 18 || &head[..4] != b"\x7fELF" {
        return Ok(None);
    }
    let e_type = u16::from_ne_bytes([head[16], head[17]]);
    if e_type != 2 && e_type != 3 {
        return Ok(None);
    }
    let (is64, phoff, phnum, phentsize) = match head[4] {
        1 if head.len() >= 52 => (false, u64::from(u32_at(head, 28)), u16_at(head, 44), 32),
        2 if head.len() >= 64 => (true, u64_at(head, 32), u16_at(head, 56), 56),
        _ => return Ok(None),
    };
    let phnum = usize::from(phnum).min(MAX_PHDR_CNT);
    let table_len = phnum * phentsize;
    let Some(table_end) = phoff.checked_add(table_len as u64) else {
        return Ok(None);
    };
    let owned;
    let table: &[u8] = if table_end <= head.len() as u64 {
        &head[phoff as usize..table_end as usize]
    } else {
        let mut v = vec![0u8; table_len];
        let n = read_at_most(file, &mut v, phoff)?;
        v.truncate(n - n % phentsize);
        owned = v;
        &owned
    };

    for ph in table.chunks_exact(phentsize) {
        if u32_at(ph, 0) != PT_NOTE {
            continue;
        }
        let (off, filesz) = if is64 {
            (u64_at(ph, 8), u64_at(ph, 32))
        } else {
            (u64::from(u32_at(ph, 4)), u64::from(u32_at(ph, 16)))
        };
        // The kernel keeps the note size in 32 bits.
        let filesz = u64::from(filesz as u32).min(MAX_NOTE_SEGMENT);
        let notes: Vec<u8>;
        let seg: &[u8] = match off.checked_add(filesz) {
            Some(end) if end <= head.len() as u64 => &head[off as usize..end as usize],
            Some(_) => {
                let mut v = vec![0u8; filesz as usize];
                let n = read_at_most(file, &mut v, off)?;
                v.truncate(n);
                notes = v;
                &notes
            }
            None => continue,
        };
        if let Some(id) = find_gnu_build_id(seg) {
            // find_gnu_build_id keeps to 1..=BUILD_ID_SIZE_MAX bytes.
            return Ok(BuildId::new(id));
        }
    }
    Ok(None)
}

/// The running kernel's build ID, from its notes (`/sys/kernel/notes`);
/// `Ok(None)` when they hold none.
pub fn kernel_build_id() -> io::Result<Option<BuildId>> {
    let notes = std::fs::read("/sys/kernel/notes")?;
    Ok(find_gnu_build_id(&notes).and_then(BuildId::new))
}

/// Walks the notes of one segment (4-byte aligned name and descriptor).
fn find_gnu_build_id(seg: &[u8]) -> Option<&[u8]> {
    const NAME: &[u8] = b"GNU\0";
    let mut off = 0usize;
    // Like the kernel: stop once less than a header plus "GNU\0" remains.
    while seg.len().saturating_sub(off) > 12 + NAME.len() {
        let namesz = u32_at(seg, off) as usize;
        let descsz = u32_at(seg, off + 4) as usize;
        let ntype = u32_at(seg, off + 8);
        let next = (off + 12)
            .checked_add(align4(namesz)?)?
            .checked_add(align4(descsz)?)?;
        if next > seg.len() {
            return None;
        }
        if ntype == NT_GNU_BUILD_ID
            && namesz == NAME.len()
            && &seg[off + 12..off + 12 + NAME.len()] == NAME
            && (1..=BUILD_ID_SIZE_MAX).contains(&descsz)
        {
            let d = off + 12 + align4(NAME.len())?;
            return seg.get(d..d + descsz);
        }
        off = next;
    }
    None
}

fn align4(n: usize) -> Option<usize> {
    n.checked_add(3).map(|v| v & !3)
}

fn read_at_most(file: &impl ReadAt, buf: &mut [u8], off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], off + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_ne_bytes([b[o], b[o + 1]])
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[o..o + 4]);
    u32::from_ne_bytes(a)
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[o..o + 8]);
    u64::from_ne_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(name: &[u8], ntype: u32, desc: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&(name.len() as u32).to_ne_bytes());
        v.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
        v.extend_from_slice(&ntype.to_ne_bytes());
        v.extend_from_slice(name);
        v.resize(align4(v.len()).unwrap(), 0);
        v.extend_from_slice(desc);
        v.resize(align4(v.len()).unwrap(), 0);
        v
    }

    #[test]
    fn finds_build_id_after_other_notes() {
        let mut seg = note(b"GNU\0", 1, &[0; 16]); // NT_GNU_ABI_TAG
        seg.extend(note(b"GNU\0", 3, &[0xab; 20]));
        assert_eq!(find_gnu_build_id(&seg), Some(&[0xab; 20][..]));
    }

    #[test]
    fn rejects_wrong_name_and_oversized_ids() {
        assert_eq!(find_gnu_build_id(&note(b"GNV\0", 3, &[1; 20])), None);
        assert_eq!(find_gnu_build_id(&note(b"GNU\0", 3, &[1; 21])), None);
        assert_eq!(find_gnu_build_id(&note(b"GNU\0", 3, &[])), None);
        // Truncated descriptor.
        let mut n = note(b"GNU\0", 3, &[1; 20]);
        n.truncate(n.len() - 4);
        assert_eq!(find_gnu_build_id(&n), None);
    }

    #[test]
    fn reads_own_executable() {
        // Rust test binaries are linked with a GNU build ID by default.
        let f = File::open("/proc/self/exe").unwrap();
        let id = read(&f).unwrap().expect("test binary has a build ID");
        assert!(!id.as_bytes().is_empty() && id.as_bytes().len() <= 20);
    }

    #[test]
    fn non_elf_is_none() {
        let f = File::open("/proc/self/status").unwrap();
        assert_eq!(read(&f).unwrap(), None);
    }
}
