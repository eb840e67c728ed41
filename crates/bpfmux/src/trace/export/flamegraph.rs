//! A flame graph SVG of a [`Profile`], drawn by the `inferno` crate (the
//! Rust port of flamegraph.pl) from its folded lines ([`super::folded`]):
//! a box per frame, as wide as its value, callers below callees, with
//! search and zoom in a browser. Colors are chosen from each function's
//! name, so the same stacks draw the same picture.
//!
//! Behind the cargo feature `flamegraph` (on by default): inferno is
//! licensed CDDL-1.0, which a build that must be distributable under
//! GPL-2.0 alone can leave out.

use std::io::Write;

use inferno::flamegraph::{self as inferno_fg, Options};

use super::{folded, Error, Profile, CALLS, TIME_NS};

/// Draws `p` with `title` on top; its main value gives the widths, named
/// `calls` or `ns` in each box's tooltip. [`Error::Empty`] when no sample
/// has a value above 0 (the SVG written then says so).
pub fn write(out: impl Write, p: &Profile, title: &str) -> Result<(), Error> {
    let lines = folded::lines(p);
    let mut opt = Options::default();
    opt.title = title.to_string();
    opt.count_name = match p.sample_types.get(p.main) {
        Some(&t) if t == CALLS => "calls".into(),
        Some(&t) if t == TIME_NS => "ns".into(),
        Some(t) => t.unit.into(),
        None => "samples".into(),
    };
    // Colors from the function's name, not chance: the same input, the same file.
    opt.hash = true;
    let empty = lines.is_empty();
    let drawn = inferno_fg::from_lines(&mut opt, lines.iter().map(String::as_str), out);
    match drawn {
        Err(_) if empty => Err(Error::Empty),
        r => Ok(r?),
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::stacks;
    use super::*;

    fn svg(p: &Profile) -> String {
        let mut out = Vec::new();
        write(&mut out, p, "calls per stack").unwrap();
        String::from_utf8(out).unwrap()
    }

    /// Every frame name is drawn, with its calls in the tooltip.
    #[test]
    fn the_svg_names_every_frame() {
        let p = Profile::from_stacks(&stacks());
        let text = svg(&p);
        assert!(text.starts_with("<?xml"), "{}", &text[..100]);
        assert!(text.contains("calls per stack"));
        for name in [
            "__x64_sys_getpgid",
            "entry_SYSCALL_64",
            "do_syscall_64",
            "main",
            "helper",
            "[libc.so.6]",
        ] {
            assert!(
                text.contains(&format!("<title>{name} (")),
                "{name} not drawn"
            );
        }
        // 6 calls in all, 3 through a.
        assert!(
            text.contains("<title>all (6 calls, 100%)</title>"),
            "{text}"
        );
        assert!(
            text.contains("<title>a (3 calls, 50.00%)</title>"),
            "{text}"
        );
        // Drawn again, the same bytes.
        assert_eq!(svg(&p), text);
    }

    #[test]
    fn nothing_to_draw_is_said() {
        let mut out = Vec::new();
        let e = write(&mut out, &Profile::from_stacks(&[]), "t").unwrap_err();
        assert!(matches!(e, Error::Empty), "{e:?}");
        assert!(String::from_utf8(out).unwrap().contains("No valid input"));
    }
}
