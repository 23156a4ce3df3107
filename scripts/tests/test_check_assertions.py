"""Unit tests of scripts/check-assertions: each way a test could seem to assert
without asserting is flagged, and the ways the real tests assert are accepted.

    python3 -m unittest discover -s scripts/tests -p 'test_check_assertions.py'
"""

import importlib.machinery
import importlib.util
import io
import sys
import tempfile
import textwrap
import unittest
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "check-assertions"
_loader = importlib.machinery.SourceFileLoader("check_assertions", str(SCRIPT))
_spec = importlib.util.spec_from_loader("check_assertions", _loader)
ca = importlib.util.module_from_spec(_spec)
sys.modules["check_assertions"] = ca  # dataclasses look their module up there
_loader.exec_module(ca)

MANIFEST = """
[package]
name = "demo"
version = "0.1.0"
edition = "2021"
"""

# The support module of the integration tests, as tests/it has it: a World whose
# methods assert or not, a matrix! macro.
SUPPORT = """
pub mod world;
pub use world::*;

pub fn helper_asserts(x: u32) {
    assert_eq!(x, 1);
}

pub fn helper_does_not(x: u32) -> u32 {
    x + 1
}

pub fn transitive(x: u32) {
    helper_asserts(x)
}

macro_rules! matrix {
    ($($t:tt)*) => {};
}
"""

WORLD = """
pub struct World {
    pub name: String,
    pub inner: Inner,
}

pub struct Inner(u32);

pub struct Run {
    pub code: i32,
}

pub struct Other;

impl Other {
    pub fn check(&self) {}
    pub fn new() -> Other {
        Other
    }
}

impl Inner {
    pub fn verify(&self) {
        assert!(self.0 > 0);
    }
}

impl World {
    pub fn new(name: &str) -> World {
        World { name: name.to_string(), inner: Inner(1) }
    }
    pub fn run(&self, input: &str) -> Run {
        Run { code: input.len() as i32 }
    }
    pub fn check(&self) {
        assert!(!self.name.is_empty());
    }
    pub fn check_twice(&self) {
        self.check();
        self.check();
    }
    pub fn parse(&self) {
        assert!(self.name.len() > 1);
    }
    pub fn try_new(name: &str) -> Option<World> {
        Some(World::new(name))
    }
}

impl Run {
    pub fn assert_ok(&self) {
        assert_eq!(self.code, 0);
    }
}

pub fn world() -> World {
    World::new("w")
}
"""


class Tree:
    """A throwaway crate: tests/it/{main,support/...}.rs plus any file written."""

    def __init__(self):
        self._dir = tempfile.TemporaryDirectory()
        self.root = Path(self._dir.name)
        self.write("Cargo.toml", MANIFEST)
        self.write("src/lib.rs", "pub fn lib() {}\n")
        self.write("tests/it/support/mod.rs", SUPPORT)
        self.write("tests/it/support/world.rs", WORLD)
        self.write("tests/it/main.rs", "#[macro_use]\nmod support;\nmod suite;\n")

    def write(self, rel, text):
        p = self.root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")

    def suite(self, body):
        """tests/it/suite.rs: `use crate::support::*;` and the given items."""
        self.write("tests/it/suite.rs", "use crate::support::*;\n\n" + textwrap.dedent(body))

    def offenders(self):
        lines, _, _, _ = ca.check(self.root)
        return [line.split(" ", 1)[1].split(" (")[0] for line in lines]

    def close(self):
        self._dir.cleanup()


class Base(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.close)

    def flagged(self, body, name="t"):
        self.tree.suite(body)
        offenders = self.tree.offenders()
        self.assertIn(name, offenders, f"{name} should be flagged")
        return offenders

    def accepted(self, body, name="t"):
        self.tree.suite(body)
        offenders = self.tree.offenders()
        self.assertNotIn(name, offenders, f"{name} should assert")
        return offenders


class CallsResolveExactly(Base):
    def test_a_std_constructor_sharing_a_helpers_name_is_no_assertion(self):
        self.flagged("""
            impl Run {
                pub fn new() -> Run { assert!(helper_does_not(0) == 1); Run { code: 0 } }
            }
            #[test]
            fn t() {
                let v: Vec<u8> = Vec::new();
                let _ = v;
            }
        """)

    def test_a_method_of_std_sharing_a_helpers_name_is_no_assertion(self):
        # World::parse asserts; "1".parse() is str's.
        self.flagged("""
            #[test]
            fn t() {
                let n: u32 = "1".parse().unwrap();
                let _ = n;
            }
        """)

    def test_a_method_on_a_receiver_of_unknown_type_is_no_assertion(self):
        # World::check asserts, but nothing says what `w` is.
        self.flagged("""
            fn make() -> impl Sized { 1u8 }
            #[test]
            fn t() {
                let w = make();
                w.check();
            }
        """)

    def test_a_closure_parameter_without_a_type_shadows_the_outer_binding(self):
        self.flagged("""
            #[test]
            fn t() {
                let w = World::new("a");
                let ws = vec![1u8];
                ws.iter().for_each(|w| w.check());
            }
        """)

    def test_a_free_function_not_in_scope_is_no_assertion(self):
        # support::world::helper_hidden asserts but suite.rs cannot name it unqualified.
        self.tree.write("tests/it/support/world.rs", WORLD + "\nfn helper_hidden() { assert!(1 > 2 - 3 * 0 + helper_len()); }\nfn helper_len() -> usize { 0 }\n")
        self.flagged("""
            fn helper_hidden() {}
            #[test]
            fn t() {
                helper_hidden();
            }
        """)

    def test_a_path_call_resolves_to_that_types_impl(self):
        # World::check asserts; Other::check does not.
        self.flagged("""
            #[test]
            fn t() {
                let o = Other::new();
                o.check();
                Other::check(&o);
            }
        """)

    def test_a_helper_that_does_not_assert(self):
        self.flagged("""
            #[test]
            fn t() {
                let _ = helper_does_not(1);
            }
        """)

    def test_a_method_resolves_to_the_receivers_type_only(self):
        # Runner::run asserts; World::run, the method called, does not.
        self.flagged("""
            struct Runner;
            impl Runner {
                fn run(&self, input: &str) {
                    assert!(!input.is_empty());
                }
            }
            #[test]
            fn t() {
                let w = World::new("a");
                let _ = w.run("x");
            }
        """)

    def test_an_async_helper_never_awaited(self):
        self.flagged("""
            async fn check(w: &World) {
                w.check();
            }
            #[tokio::test]
            async fn t() {
                let w = world();
                let _ = check(&w);
            }
        """)

    def test_expect_and_unwrap_alone_are_no_assertion(self):
        self.flagged("""
            #[test]
            fn t() {
                let w = World::try_new("a").expect("a world");
                let _ = Some(1).unwrap();
                let _ = w.run("x");
            }
        """)


class Reachability(Base):
    def test_constant_assertions_do_not_count(self):
        for body in ("assert!(true);", "assert_eq!(1, 1);", "assert!(1 == 1);", 'assert_ne!("a", "b");',
                     "debug_assert!(!false);", 'assert!(true, "{}", helper_asserts(1));'):
            with self.subTest(body=body):
                self.flagged(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_an_assertion_inside_if_false(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                if false {
                    assert_eq!(x, 1);
                }
                if 1 == 2 {
                    helper_asserts(x);
                } else if !true {
                    helper_asserts(x);
                } else {
                    let _ = x;
                }
            }
        """)

    def test_the_else_of_if_true(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                if true {
                    let _ = x;
                } else {
                    assert_eq!(x, 1);
                }
            }
        """)

    def test_a_closure_never_called(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                let check = || assert_eq!(x, 1);
                let _also = |y: u32| { helper_asserts(y) };
            }
        """)

    def test_a_closure_or_fn_stored_in_a_constructor(self):
        self.flagged("""
            #[test]
            fn t() {
                let _f = Some(helper_asserts);
                let _g = Ok::<_, ()>(|| assert_eq!(helper_does_not(1), 2));
            }
        """)

    def test_a_closure_called_only_where_unreachable(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                let check = || assert_eq!(x, 1);
                if false {
                    check();
                }
            }
        """)

    def test_an_assertion_after_return(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                return;
                assert_eq!(x, 1);
            }
        """)

    def test_an_assertion_after_a_block_that_returns(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                {
                    let _ = x;
                    return;
                }
                helper_asserts(x);
            }
        """)

    def test_a_nested_fn_never_called(self):
        self.flagged("""
            #[test]
            fn t() {
                fn inner() {
                    assert_eq!(1 + 1, two());
                }
                fn two() -> u32 { 2 }
                let _ = 1;
            }
        """)

    def test_an_async_block_never_awaited(self):
        self.flagged("""
            #[tokio::test]
            async fn t() {
                let x = 1;
                let _fut = async move { assert_eq!(x, 1) };
                let run = |y: u32| async move { assert_eq!(y, 1) };
                let _ = run(x);
            }
        """)

    def test_an_assertion_gated_by_cfg(self):
        self.flagged("""
            #[test]
            fn t() {
                let x = 1;
                #[cfg(any())]
                assert_eq!(x, 1);
            }
        """)


class Tautologies(Base):
    def run_cases(self, check, cases):
        for body in cases:
            with self.subTest(body=body):
                check(f"""
                    #[test]
                    fn t() {{
                        let r: Result<u32, ()> = Ok(helper_does_not(1));
                        let x = Some(helper_does_not(1));
                        let n = helper_does_not(1);
                        let w = world();
                        {body}
                    }}
                """)

    def test_a_condition_that_cannot_fail_is_no_assertion(self):
        self.run_cases(self.flagged, [
            "assert!(r.is_ok() || r.is_err());",
            "assert!(x.is_some() || x.is_none());",
            "assert!(n > 1 || !(n > 1));",
            "assert!(!w.name.is_empty() || w.name.is_empty());",
            "debug_assert!(x.is_none() || n == 0 || x.is_some());",
            "assert_eq!(n, n);",
            "assert_eq!(w.name, (w.name));",
            "assert!(n == n);",
        ])

    def test_a_condition_close_to_a_tautology_still_asserts(self):
        self.run_cases(self.accepted, [
            "assert!(r.is_ok() || x.is_none());",
            "assert!(n > 1 && n < 5 || !(n > 1));",
            "assert!(!n.is_power_of_two() && n > 0 || n.is_power_of_two());",
            "assert_eq!(n, n + 1);",
            "let mut it = [1u32, 2].into_iter();\n    assert_eq!(it.next(), it.next());",
        ])


class LiteralBindings(Base):
    def test_asserting_a_value_just_set_is_no_assertion(self):
        for body in ("let n = 3;\n    assert_eq!(n, 3);",
                     "let n: u32 = 3;\n    let m = n * 2 + 1;\n    assert!(m == 7 && n != 0);",
                     "let mut x = helper_does_not(1);\n    let _ = x;\n    x = 5;\n    assert_eq!(x, 5);",
                     "let s = \"a\";\n    let check = || assert_ne!(s, \"b\");\n    check();"):
            with self.subTest(body=body):
                self.flagged(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_a_binding_whose_value_is_not_known_still_asserts(self):
        for body in ("let n = helper_does_not(1);\n    assert_eq!(n, 3);",
                     "let mut n = 3;\n    n += helper_does_not(1);\n    assert_eq!(n, 3);",
                     "let n = 3;\n    let m = helper_does_not(n);\n    assert_eq!(m, 3);",
                     "let mut x = 1;\n    x = 5;\n    x += helper_does_not(1);\n    assert_eq!(x, 5);",
                     "let n = 3;\n    let n = helper_does_not(n);\n    assert_eq!(n, 3);"):
            with self.subTest(body=body):
                self.accepted(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)


class EmptyLoops(Base):
    def loop_over(self, check, setup, iterable):
        check(f"""
            fn ids() -> Vec<u32> {{ vec![1] }}
            #[test]
            fn t() {{
                {setup}
                for x in {iterable} {{
                    helper_asserts(x);
                }}
            }}
        """)

    def test_an_assertion_in_a_loop_over_an_empty_collection(self):
        for setup, iterable in [("", "Vec::<u32>::new()"), ("", "vec![]"), ("", "[]"), ("", "0..0"),
                                ("", "3..=2"), ("", "std::collections::HashSet::<u32>::new()"),
                                ("", "&[] as &[u32]"), ("let v: Vec<u32> = vec![];", "&v"),
                                ("let v: Vec<u32> = Vec::new();", "v.iter()")]:
            with self.subTest(iterable=iterable):
                self.loop_over(self.flagged, setup, iterable)

    def test_a_loop_over_a_collection_not_known_empty_still_asserts(self):
        for setup, iterable in [("", "vec![1]"), ("let n = helper_does_not(0);", "0..n"), ("", "0..=0"),
                                ("let mut v = vec![];\n    v.push(1);", "&v"), ("", "ids()")]:
            with self.subTest(iterable=iterable):
                self.loop_over(self.accepted, setup, iterable)


class EnvironmentGuards(Base):
    def test_an_assertion_reached_only_when_a_variable_is_set(self):
        cases = [
            'if std::env::var("X").is_ok() {\n        helper_asserts(1);\n    }',
            'use std::env;\n    if env::var_os("X").is_some() && helper_does_not(1) == 2 {\n'
            '        helper_asserts(1);\n    }',
            'if let Ok(v) = std::env::var("X") {\n        assert!(!v.is_empty());\n    }',
            'use std::env;\n    if let Some(v) = env::var_os("X") {\n        assert!(!v.is_empty());\n    }',
            'if std::env::var("X").is_err() {\n        return;\n    }\n    helper_asserts(1);',
            'if !std::env::var_os("X").is_some() {\n        return;\n    }\n    helper_asserts(1);',
            'let Ok(v) = std::env::var("X") else { return };\n    assert!(!v.is_empty());',
            'match std::env::var("X") {\n        Ok(v) => assert!(!v.is_empty()),\n        Err(_) => {}\n    }',
            'let v = match std::env::var("X") {\n        Ok(v) => v,\n        Err(_) => return,\n    };\n'
            '    assert!(!v.is_empty());',
        ]
        for body in cases:
            with self.subTest(body=body):
                self.flagged(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_an_environment_read_used_as_a_value_or_in_both_branches_still_asserts(self):
        cases = [
            'let v = std::env::var("HOME").unwrap();\n    assert!(v.len() > 0);',
            'let dir = std::env::var("X").unwrap_or_default();\n    assert!(dir.is_empty() || dir.len() > 1);',
            'if std::env::var("X").is_ok() {\n        helper_asserts(1);\n    } else {\n'
            '        helper_asserts(2);\n    }',
            'if std::env::var("X").is_ok() {\n        return;\n    }\n    helper_asserts(1);',
            'match std::env::var("X") {\n        Ok(v) => assert!(!v.is_empty()),\n'
            '        Err(_) => helper_asserts(1),\n    }',
        ]
        for body in cases:
            with self.subTest(body=body):
                self.accepted(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)


class EveryTestCrate(Base):
    def test_examples_benches_other_test_crates_and_src(self):
        self.tree.suite("#[test]\nfn fine() { assert_eq!(helper_does_not(1), 2); }\n")
        self.tree.write("examples/demo.rs", """
            fn main() {}
            #[cfg(test)]
            mod tests {
                #[test]
                fn in_an_example() {}
            }
        """)
        self.tree.write("examples/multi/main.rs", "fn main() {}\n#[test]\nfn in_a_dir_example() {}\n")
        self.tree.write("benches/speed.rs", "#[test]\nfn in_a_bench() { let _ = 1; }\n")
        self.tree.write("tests/other.rs", "#[test]\nfn in_another_test_crate() {}\n")
        self.tree.write("src/lib.rs", "mod inner;\n")
        self.tree.write("src/inner.rs", """
            pub fn asserts_but_is_not_test_code(x: u32) { assert!(x > 0); }
            #[cfg(test)]
            mod tests {
                use super::*;
                #[test]
                fn in_src() { asserts_but_is_not_test_code(1) }
            }
        """)
        self.tree.write("crates/sub/Cargo.toml", MANIFEST.replace("demo", "sub"))
        self.tree.write("crates/sub/src/lib.rs", "#[test]\nfn in_a_member() {}\n")
        self.tree.write("target/debug/build/x/out/gen.rs", "#[test]\nfn in_target() {}\n")
        offenders = self.tree.offenders()
        for name in ("in_an_example", "in_a_dir_example", "in_a_bench", "in_another_test_crate", "in_src",
                     "in_a_member"):
            self.assertIn(name, offenders)
        self.assertNotIn("in_target", offenders)
        self.assertNotIn("fine", offenders)


class RealPatternsAccepted(Base):
    def test_a_direct_assertion(self):
        self.accepted("""
            #[test]
            fn t() {
                let x = helper_does_not(1);
                assert_eq!(x, 2);
            }
        """)

    def test_a_helper_through_a_use(self):
        self.tree.write("tests/it/suite.rs", """
            use crate::support::{helper_asserts as check_one, World};
            #[test]
            fn t() {
                let _w: Option<World> = None;
                check_one(1);
            }
        """)
        self.assertNotIn("t", self.tree.offenders())

    def test_a_helper_of_the_parent_through_use_super_glob(self):
        self.accepted("""
            fn local_check(x: u32) {
                assert!(x > 0, "x = {x}");
            }
            mod inner {
                use super::*;
                #[test]
                fn t() {
                    local_check(1);
                }
            }
        """)

    def test_a_transitive_helper(self):
        self.accepted("""
            fn twice(x: u32) {
                transitive(x);
            }
            #[test]
            fn t() {
                twice(1)
            }
        """)

    def test_a_method_on_a_typed_parameter(self):
        self.accepted("""
            fn check_it(w: &World) {
                w.check();
            }
            fn check_mut(w: &mut World) {
                w.check_twice();
            }
            #[test]
            fn t() {
                let mut w = World::new("a");
                check_it(&w);
                check_mut(&mut w);
            }
        """)

    def test_receivers_of_known_type(self):
        cases = [
            'let w = World::new("a");\n    w.check();',
            'let w: World = make();\n    w.check();',
            "let w = world();\n    w.check();",
            'let w = World { name: "a".into(), inner: Inner(1) };\n    w.check();',
            'let r = World::new("a").run("x");\n    r.assert_ok();',
            'World::new("a").run("x").assert_ok();',
            'let w = World::new("a");\n    w.inner.verify();',
            'let w = World::try_new("a").unwrap();\n    w.check();',
            "World::check(&world());",
        ]
        for body in cases:
            with self.subTest(body=body):
                self.accepted(f"""
                    fn make() -> World {{ World::new("m") }}
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_receivers_bound_by_patterns(self):
        cases = [
            'if let Some(w) = World::try_new("a") {\n        w.check();\n    }',
            'match World::try_new("a") {\n        Some(w) => w.check(),\n        None => {}\n    }',
            'let Pair { w, n: _ } = pair();\n    w.check();',
            'let (w, _n) = (world(), 1);\n    w.check();',
            'let ws = vec![world()];\n    for w in ws {\n        w.check();\n    }',
            'let ws: Vec<World> = vec![world()];\n    for w in ws.iter() {\n        w.check();\n    }',
            'let p = Slot::Full(world());\n    if let Slot::Full(w) = p {\n        w.check();\n    }',
        ]
        for body in cases:
            with self.subTest(body=body):
                self.accepted(f"""
                    struct Pair {{ w: World, n: u8 }}
                    fn pair() -> Pair {{ Pair {{ w: world(), n: 1 }} }}
                    enum Slot {{ Empty, Full(World) }}
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_self_inside_an_impl(self):
        self.accepted("""
            struct Fixture { w: World }
            impl Fixture {
                fn verify(&self) {
                    self.w.check();
                }
            }
            #[test]
            fn t() {
                let f = Fixture { w: world() };
                f.verify();
            }
        """)

    def test_closures_that_run(self):
        cases = [
            "let check = |x: u32| assert_eq!(x, 1);\n    check(1);",
            "let check = |x: u32| assert_eq!(x, 1);\n    [1].into_iter().for_each(check);",
            "[1u32].into_iter().for_each(|x| assert_eq!(x, 1));",
            "std::thread::spawn(move || helper_asserts(1)).join().unwrap();",
        ]
        for body in cases:
            with self.subTest(body=body):
                self.accepted(f"""
                    #[test]
                    fn t() {{
                        {body}
                    }}
                """)

    def test_a_nested_fn_called(self):
        self.accepted("""
            #[test]
            fn t() {
                fn inner(x: u32) {
                    assert_eq!(x, 1);
                }
                inner(1);
            }
        """)

    def test_an_assertion_in_a_branch_or_after_a_conditional_return(self):
        self.accepted("""
            #[test]
            fn t() {
                let x = std::env::args().count();
                if x == 0 {
                    return;
                }
                match x {
                    1 => assert_eq!(x, 1),
                    _ => {}
                }
            }
        """)

    def test_a_matrix_body(self):
        self.tree.suite("""
            fn body_ok(kind: u8) {
                assert_eq!(kind, kind + 0);
            }
            fn body_empty(kind: u8) {
                let _ = kind;
            }
            matrix! {
                body_ok: [local, moto];
                other: [local] => body_empty(1);
            }
        """)
        offenders = self.tree.offenders()
        self.assertIn("body_empty", offenders)
        self.assertNotIn("body_ok", offenders)

    def test_a_matrix_body_exported_by_the_library(self):
        # A suite the package's library exports for tests (as landing-store's
        # conformance module): its bodies resolve through the library's name, and only
        # its test code asserts.
        self.tree.write("src/lib.rs", """
            #[cfg(any(test, feature = "suite"))]
            pub mod suite;
            pub fn not_test_code(x: u32) { assert!(x > 0); }
        """)
        self.tree.write("src/suite.rs", """
            pub fn exported_ok(x: u32) { assert_eq!(x, x + 0); }
            pub fn exported_empty(x: u32) { let _ = x; }
            fn private_ok(x: u32) { assert_eq!(x, x + 0); }
        """)
        self.tree.write("tests/suite/main.rs", """
            use demo::suite::*;
            use demo::not_test_code;
            macro_rules! matrix {
                ($($t:tt)*) => {};
            }
            matrix! {
                exported_ok: [local];
                exported_empty: [local];
                private_ok: [local];
                not_test_code: [local];
            }
        """)
        offenders = self.tree.offenders()
        self.assertNotIn("exported_ok", offenders)
        for name in ("exported_empty", "private_ok", "not_test_code"):
            self.assertIn(name, offenders)

    def test_should_panic_and_panic(self):
        self.tree.suite("""
            #[test]
            #[should_panic(expected = "boom")]
            fn t() {
                helper_does_not(1);
            }
            #[test]
            fn p() {
                let x = helper_does_not(1);
                if x != 2 {
                    panic!("bad state: {x}");
                }
            }
        """)
        offenders = self.tree.offenders()
        self.assertNotIn("t", offenders)
        self.assertNotIn("p", offenders)

    def test_qualified_macros(self):
        cases = [
            "std::assert!(helper_does_not(1) == 2);",
            "std::panic!(\"bad state\");",
            "let ((), ()) = tokio::join!(check(&world()), async { helper_asserts(1) });",
        ]
        for body in cases:
            with self.subTest(body=body):
                self.accepted(f"""
                    async fn check(w: &World) {{
                        w.check();
                    }}
                    #[tokio::test]
                    async fn t() {{
                        {body}
                    }}
                """)

    def test_an_async_body_awaited(self):
        self.accepted("""
            async fn check(w: &World) {
                w.check();
            }
            #[tokio::test]
            async fn t() {
                let w = world();
                check(&w).await;
                let fut = async { helper_asserts(1) };
                fut.await;
                let run = |x: u32| async move { assert_eq!(x, 1) };
                run(1).await;
            }
        """)


class Output(Base):
    def test_verbose_lists_each_test_and_the_summary_line(self):
        self.tree.suite("""
            #[test]
            fn t() {
                helper_asserts(1);
            }
        """)
        out, err = io.StringIO(), io.StringIO()
        rc = ca.run(self.tree.root, True, out, err)
        self.assertEqual(rc, 0, err.getvalue())
        self.assertIn("  tests/it/suite.rs:5 t: calls helper_asserts (tests/it/support/mod.rs)", out.getvalue())
        self.assertRegex(out.getvalue(), r"check-assertions: OK: 1 tests assert \(1 #\[test\]/#\[tokio::test\] "
                                         r"functions, 0 matrix bodies for 0 entries; \d+ asserting helpers; "
                                         r"0 assert only through panic!\)")

    def test_an_offender_fails_with_file_line_and_name(self):
        self.tree.suite("""
            #[test]
            fn empty() {}
        """)
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(ca.run(self.tree.root, False, out, err), 1)
        self.assertIn("  tests/it/suite.rs:5 empty", err.getvalue())


if __name__ == "__main__":
    unittest.main()
