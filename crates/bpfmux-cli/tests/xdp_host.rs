//! `bpfmux xdp` on the host, inside a private network + mount namespace (a
//! veth pair, a private bpffs): one program attaches, lists, replaces and
//! detaches; several programs either run on the dispatcher or, where the
//! kernel refuses freplace (this project's hosts), fail cleanly with nothing
//! left behind. The full chaining checks need trampolines and run in the
//! guest (tests/guest/suite.d/50-xdp.sh). Needs root, clang, iproute2.

use std::path::{Path, PathBuf};
use std::process::Command;

const PROGRAMS: &str = r#"
struct xdp_md { unsigned int data, data_end, data_meta, ingress_ifindex, rx_queue_index, egress_ifindex; };
#define SEC(n) __attribute__((section(n), used))
SEC("xdp") int host_pass(struct xdp_md *ctx) { return 2; }
SEC("xdp") int host_drop(struct xdp_md *ctx) { return 1; }
char LICENSE[] SEC("license") = "GPL";
"#;

/// Compiles the test programs into a fresh directory (one per test: tests
/// run in parallel).
fn object(test: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("bpfmux-xdp-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("host.bpf.c");
    std::fs::write(&src, PROGRAMS).expect("write source");
    let obj = dir.join("host.bpf.o");
    let st = Command::new("clang")
        .args(["-O2", "-g", "-target", "bpf", "-c"])
        .arg(&src)
        .arg("-o")
        .arg(&obj)
        .status()
        .expect("run clang");
    assert!(st.success(), "clang failed");
    (dir, obj)
}

struct Out {
    ok: bool,
    text: String,
}

/// Runs `script` with $B (bpfmux) and $O (object) in a new network and
/// mount namespace with veth pair h0/h1 (up) and a private bpffs.
fn in_netns(obj: &Path, script: &str) -> Out {
    let setup = "set -e; mkdir -p /tmp/bpfmux-xdp-host-fs; \
        mount -t bpf bpf /tmp/bpfmux-xdp-host-fs; export BPFMUX_BPFFS=/tmp/bpfmux-xdp-host-fs; \
        ip link add h0 type veth peer name h1; ip link set h0 up; ip link set h1 up; set +e; ";
    let out = Command::new("unshare")
        .args(["--mount", "--net", "sh", "-c"])
        .arg(format!("{setup}{script}"))
        .env("B", env!("CARGO_BIN_EXE_bpfmux"))
        .env("O", obj)
        .output()
        .expect("run unshare (needs root)");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Out {
        ok: out.status.success(),
        text,
    }
}

#[test]
fn one_program_attach_list_replace_detach() {
    let (dir, obj) = object("one");
    let out = in_netns(
        &obj,
        r#"
        $B xdp attach h1 "$O:host_pass" || exit 10
        echo "--list1"; $B xdp list
        echo "--full"; $B xdp list 2>&1 >/dev/full; echo "rc $?"
        $B xdp list --json 2>&1 >/dev/full; echo "rc $?"
        echo "--ip1"; ip -d link show h1 | grep -o 'prog/xdp id [0-9]* name [a-z_]*'
        echo "--pins1"; find "$BPFMUX_BPFFS/bpfmux/xdp" -mindepth 3 | sed "s|$BPFMUX_BPFFS||" | sort
        $B xdp attach h1 "$O:host_drop" || exit 11
        echo "--list2"; $B xdp list
        $B xdp detach h1 || exit 12
        echo "--ip2"; ip -d link show h1 | grep -c 'prog/xdp' || true
        echo "--pins2"; find "$BPFMUX_BPFFS/bpfmux/xdp" -mindepth 1 | wc -l
        "#,
    );
    let _ = std::fs::remove_dir_all(dir);
    assert!(out.ok, "script failed:\n{}", out.text);
    let t = &out.text;
    let section = |name: &str| -> String {
        let start = t.find(&format!("--{name}\n")).expect(name) + name.len() + 3;
        t[start..].split("\n--").next().unwrap_or("").to_string()
    };
    assert!(
        section("list1").contains("1 program, engine direct")
            && section("list1").contains("host_pass"),
        "{t}"
    );
    assert!(section("ip1").contains("name host_pass"), "{t}");
    // A full disk: one line naming standard output, status 1, no panic.
    let full =
        "bpfmux: error: writing to standard output: No space left on device (os error 28)\nrc 1";
    assert_eq!(section("full").trim(), format!("{full}\n{full}"), "{t}");
    let pins = section("pins1");
    assert!(
        pins.contains("/link") && pins.contains("/state") && pins.contains("/prog-0"),
        "{t}"
    );
    assert!(
        section("list2").contains("host_drop") && !section("list2").contains("host_pass"),
        "{t}"
    );
    assert!(t.contains("replaced the set on h1"), "{t}");
    assert_eq!(
        section("ip2").trim(),
        "0",
        "XDP program left after detach:\n{t}"
    );
    assert_eq!(section("pins2").trim(), "0", "pins left after detach:\n{t}");
}

#[test]
fn several_programs_run_or_fail_cleanly() {
    let (dir, obj) = object("several");
    let out = in_netns(
        &obj,
        r#"
        $B xdp attach h1 "$O:host_pass" "$O:host_drop"; echo "--rc $?"
        echo "--ip"; ip -d link show h1 | grep -c 'prog/xdp' || true
        echo "--pins"; find "$BPFMUX_BPFFS/bpfmux/xdp" -mindepth 1 | wc -l
        echo "--list"; $B xdp list
        "#,
    );
    let _ = std::fs::remove_dir_all(dir);
    let t = &out.text;
    if t.contains("--rc 0") {
        // A host that allows freplace runs the dispatcher.
        assert!(t.contains("2 programs, engine dispatcher"), "{t}");
    } else {
        assert!(t.contains("--rc 1"), "{t}");
        assert!(
            t.contains("the kernel refused freplace (EPERM)"),
            "error does not explain the refusal:\n{t}"
        );
        assert!(
            t.contains("--ip\n0\n"),
            "XDP program left after a failed attach:\n{t}"
        );
        assert!(
            t.contains("--pins\n0\n"),
            "pins left after a failed attach:\n{t}"
        );
        assert!(t.contains("no XDP sets attached by bpfmux"), "{t}");
    }
}

/// The libxdp engine (libxdp's bpffs state in the private bpffs too): it
/// runs in libxdp's dispatcher where the kernel allows freplace, and fails
/// with the reason where it does not (this project's hosts, where libxdp
/// falls back to a program without its dispatcher) or where libxdp is
/// missing, with nothing left on the interface or in bpffs.
#[test]
fn libxdp_engine_runs_or_fails_cleanly() {
    let (dir, obj) = object("libxdp");
    let out = in_netns(
        &obj,
        r#"
        export LIBXDP_BPFFS=$BPFMUX_BPFFS
        $B xdp attach h1 "$O:host_pass" "$O:host_drop" --engine libxdp --priority 7; echo "--rc $?"
        echo "--list"; $B xdp list
        $B xdp detach h1; echo "--detach $?"
        echo "--ip"; ip -d link show h1 | grep -c 'prog/xdp' || true
        # pins only: bpffs's own progs.debug and maps.debug are no pins
        echo "--pins"; find "$BPFMUX_BPFFS" -mindepth 1 -type f ! -name '*.debug' | wc -l
        "#,
    );
    let _ = std::fs::remove_dir_all(dir);
    let t = &out.text;
    if t.contains("--rc 0") {
        assert!(t.contains("2 programs, engine libxdp"), "{t}");
        assert!(t.contains("host_pass") && t.contains("bpfmux"), "{t}");
        assert!(t.contains("--detach 0"), "{t}");
    } else {
        assert!(t.contains("--rc 1"), "{t}");
        assert!(
            t.contains("without its dispatcher")
                || t.contains("needs BPF trampolines")
                || t.contains("libxdp is not available"),
            "error does not explain the refusal:\n{t}"
        );
        assert!(t.contains("no XDP sets attached by bpfmux"), "{t}");
    }
    assert!(
        t.contains("--ip\n0\n"),
        "XDP program left on the interface:\n{t}"
    );
    assert!(t.contains("--pins\n0\n"), "pins left:\n{t}");
}

#[test]
fn bad_inputs_are_refused_with_reasons() {
    let (dir, obj) = object("bad");
    let out = in_netns(
        &obj,
        r#"
        $B xdp attach nosuch0 "$O:host_pass"
        $B xdp attach h1 /nonexistent.o
        $B xdp attach h1 "$O:nosuch"
        $B xdp attach h1 "$O"
        $B xdp attach h1 "$O:host_pass" --chain-on bogus
        $B xdp detach h1
        echo "--pins"; find "$BPFMUX_BPFFS/bpfmux/xdp" -mindepth 1 | wc -l
        "#,
    );
    let _ = std::fs::remove_dir_all(dir);
    let t = &out.text;
    for want in [
        "no interface 'nosuch0' in this network namespace",
        "BPF object /nonexistent.o: No such file or directory",
        "no program or section 'nosuch'",
        "has several XDP programs; pick one",
        "unknown XDP action 'bogus'",
        "nothing attached to h1 by bpfmux",
    ] {
        assert!(t.contains(want), "missing '{want}' in:\n{t}");
    }
    assert!(t.contains("--pins\n0\n"), "pins left:\n{t}");
}
