//! Parser for the text `/proc/<pid>/maps` — the fallback for kernels without
//! `PROCMAP_QUERY` (ENOTTY) and the reference the ioctl path is tested
//! against. Line format (fs/proc/task_mmu.c, show_vma_header_prefix):
//! `start-end perms offset major:minor inode   name`.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use super::mapping::{Mapping, Perms};

/// One parsed line, borrowing its name from the read buffer so lines that
/// cover no address cost no allocation.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub start: u64,
    pub end: u64,
    pub perms: Perms,
    pub offset: u64,
    pub dev_major: u32,
    pub dev_minor: u32,
    pub inode: u64,
    pub name: &'a [u8],
}

impl Line<'_> {
    pub fn is_file_backed(&self) -> bool {
        self.inode != 0 || self.dev_major != 0 || self.dev_minor != 0
    }

    pub fn to_mapping(self) -> Mapping {
        Mapping {
            start: self.start,
            end: self.end,
            perms: self.perms,
            offset: self.offset,
            dev_major: self.dev_major,
            dev_minor: self.dev_minor,
            inode: self.inode,
            name: (!self.name.is_empty()).then(|| name_of(self.name)),
            build_id: None,
        }
    }
}

/// Reads the whole file from its start (it may be a kept descriptor read
/// before) in as few read() calls as the kernel allows; the buffer is
/// reused across calls.
pub fn read_all(mut maps: &File, buf: &mut Vec<u8>) -> io::Result<()> {
    buf.clear();
    if buf.capacity() < 64 * 1024 {
        buf.reserve(64 * 1024);
    }
    maps.seek(SeekFrom::Start(0))?;
    maps.read_to_end(buf).map(|_| ())
}

/// Iterates over the lines of a maps file's contents.
pub fn lines(text: &[u8]) -> impl Iterator<Item = Result<Line<'_>, String>> + '_ {
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| parse_line(l).ok_or_else(|| String::from_utf8_lossy(l).into_owned()))
}

pub fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let mut c = Cursor { s: line, i: 0 };
    let start = c.hex(b'-')?;
    let end = c.hex(b' ')?;
    let p = c.take(4)?;
    c.expect(b' ')?;
    let perms = Perms {
        read: p[0] == b'r',
        write: p[1] == b'w',
        exec: p[2] == b'x',
        shared: p[3] == b's',
    };
    let offset = c.hex(b' ')?;
    let dev_major = u32::try_from(c.hex(b':')?).ok()?;
    let dev_minor = u32::try_from(c.hex(b' ')?).ok()?;
    let inode = c.dec()?;
    // The name starts after the padding spaces and runs to end of line
    // (it may itself contain spaces).
    let rest = &line[c.i..];
    let skip = rest.iter().take_while(|&&b| b == b' ').count();
    Some(Line {
        start,
        end,
        perms,
        offset,
        dev_major,
        dev_minor,
        inode,
        name: &rest[skip..],
    })
}

/// The name as the file shows it: the kernel writes a '\n' in a path as
/// `\012` and nothing else escaped, so `\012` cannot be told from those
/// four characters in a real name. Kept verbatim; the ioctl backend escapes
/// its raw name the same way ([`super::mapping::escape_name`]).
fn name_of(name: &[u8]) -> PathBuf {
    PathBuf::from(std::ffi::OsStr::from_bytes(name))
}

struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    fn hex(&mut self, delim: u8) -> Option<u64> {
        let mut v: u64 = 0;
        let begin = self.i;
        while let Some(&b) = self.s.get(self.i) {
            let d = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                b'A'..=b'F' => b - b'A' + 10,
                _ => break,
            };
            v = v.checked_mul(16)?.checked_add(u64::from(d))?;
            self.i += 1;
        }
        if self.i == begin {
            return None;
        }
        self.expect(delim)?;
        Some(v)
    }

    fn dec(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        let begin = self.i;
        while let Some(&b @ b'0'..=b'9') = self.s.get(self.i) {
            v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            self.i += 1;
        }
        (self.i > begin).then_some(v)
    }

    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let out = self.s.get(self.i..self.i + n)?;
        self.i += n;
        Some(out)
    }

    fn expect(&mut self, b: u8) -> Option<()> {
        (self.s.get(self.i) == Some(&b)).then(|| self.i += 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_backed_line() {
        let l = parse_line(
            b"7f1c2a000000-7f1c2a028000 r-xp 00002000 fd:01 1234567                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert_eq!(l.start, 0x7f1c2a000000);
        assert_eq!(l.end, 0x7f1c2a028000);
        assert_eq!(l.perms.to_string(), "r-xp");
        assert_eq!(l.offset, 0x2000);
        assert_eq!((l.dev_major, l.dev_minor, l.inode), (0xfd, 1, 1234567));
        assert_eq!(l.name, b"/usr/lib/x86_64-linux-gnu/libc.so.6");
        assert!(l.is_file_backed());
    }

    #[test]
    fn parses_anonymous_and_special_lines() {
        let l = parse_line(b"7ffd1000-7ffd2000 rw-p 00000000 00:00 0 ").unwrap();
        assert!(l.name.is_empty());
        assert!(!l.is_file_backed());
        let l = parse_line(b"55d0a000-55d0b000 rw-s 00000000 00:00 0   [stack]").unwrap();
        assert_eq!(l.name, b"[stack]");
        assert!(l.perms.shared);
        let l = parse_line(b"1000-2000 r--p 00000000 103:02 99   /tmp/a b (deleted)").unwrap();
        assert_eq!(l.name, b"/tmp/a b (deleted)");
        assert_eq!(l.dev_major, 0x103);
    }

    #[test]
    fn keeps_the_kernels_escapes() {
        let l = parse_line(b"1000-2000 r--p 00000000 08:01 5 /tmp/a\\012b").unwrap();
        assert_eq!(l.to_mapping().name.unwrap(), PathBuf::from("/tmp/a\\012b"));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_line(b"hello").is_none());
        assert!(parse_line(b"1000-2000 r--p").is_none());
        assert!(parse_line(b"ffffffffffffffffff-2000 r--p 0 0:0 0").is_none());
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(3000))]

            /// Any bytes: an answer or None, never a panic.
            #[test]
            fn arbitrary_lines_never_panic(line in proptest::collection::vec(any::<u8>(), 0..160)) {
                let _ = parse_line(&line);
                let _ = lines(&line).count();
            }

            /// A line as the kernel prints it parses back to its fields; the
            /// name (no newline: the kernel escapes those) comes back as is.
            #[test]
            fn kernel_lines_round_trip(
                start: u64, end: u64, r: bool, w: bool, x: bool, s: bool,
                offset: u64, major in 0u32..4096, minor in 0u32..(1 << 20), inode: u64,
                name in proptest::collection::vec(any::<u8>().prop_filter("no newline", |b| *b != b'\n'), 0..64)
                    .prop_filter("padding is not part of the name", |n| n.first() != Some(&b' ')),
            ) {
                let perms = Perms { read: r, write: w, exec: x, shared: s };
                let mut text = format!(
                    "{start:08x}-{end:08x} {perms} {offset:08x} {major:02x}:{minor:02x} {inode} "
                ).into_bytes();
                if !name.is_empty() {
                    text.resize(text.len().max(73), b' ');
                    text.extend_from_slice(&name);
                }
                let l = parse_line(&text).expect("kernel line parses");
                prop_assert_eq!(
                    (l.start, l.end, l.perms, l.offset, l.dev_major, l.dev_minor, l.inode),
                    (start, end, perms, offset, major, minor, inode)
                );
                prop_assert_eq!(l.name, &name[..]);
            }
        }
    }
}
