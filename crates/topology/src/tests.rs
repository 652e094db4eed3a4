//! Queries on synthetic machines, whose answers follow from the spec.

use super::*;

#[test]
fn synthetic_2x4x2_n2_counts() {
    let t = Topology::synthetic("2x4x2:n2").unwrap();
    let s = t.summary();
    assert_eq!(
        (s.packages, s.nodes, s.cores, s.pus, s.smt),
        (2, 4, 8, 16, 2)
    );
    assert_eq!(t.cpus_of_node(0).unwrap().to_list(), "0-1,8-9");
    assert_eq!(t.cpus_of_node(3).unwrap().to_list(), "6-7,14-15");
    assert_eq!(t.siblings(0).unwrap().to_list(), "0,8");
    assert_eq!(t.distance(0, 1), Some(12));
    assert_eq!(t.distance(0, 2), Some(21));
    assert_eq!(t.nodes_by_distance(2), vec![2, 3, 0, 1]);
    assert_eq!(t.node_of_cpu(13), Some(2));
}

#[test]
fn memory_only_nodes_have_no_cpus_and_sit_near_their_package() {
    let t = Topology::synthetic("2x4x1:m2").unwrap();
    assert_eq!(t.summary().memory_only_nodes, 2);
    let n2 = t.node(2).unwrap();
    assert!(n2.is_memory_only());
    assert_eq!(t.distance(0, 2), Some(14));
    assert_eq!(t.distance(1, 2), Some(24));
    assert_eq!(t.nodes_by_distance(1), vec![1, 3, 0, 2]);
}

#[test]
fn fill_orders() {
    let t = Topology::synthetic("2x2x2").unwrap(); // cpus: p0 cores {0,4},{1,5}; p1 {2,6},{3,7}
    assert_eq!(
        t.fill_order(FillOrder::Compact),
        vec![0, 4, 1, 5, 2, 6, 3, 7]
    );
    assert_eq!(
        t.fill_order(FillOrder::SocketFirst),
        vec![0, 1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(
        t.fill_order(FillOrder::Spread),
        vec![0, 2, 1, 3, 4, 6, 5, 7]
    );
    for order in [
        FillOrder::Compact,
        FillOrder::SocketFirst,
        FillOrder::Spread,
    ] {
        let mut v = t.fill_order(order);
        v.sort_unstable();
        assert_eq!(
            v,
            (0..8).collect::<Vec<_>>(),
            "{order:?} is not a permutation"
        );
    }
}

#[test]
fn spread_alternates_packages_before_nodes_of_one_package() {
    let t = Topology::synthetic("2x4x2:n2").unwrap(); // nodes 0,1 on package 0; 2,3 on package 1
    assert_eq!(
        t.fill_order(FillOrder::Spread)[..8],
        [0, 4, 2, 6, 1, 5, 3, 7]
    );
    assert_eq!(
        t.fill_order(FillOrder::SocketFirst)[..8],
        [0, 1, 2, 3, 4, 5, 6, 7]
    );
}

#[test]
fn bad_specs_are_explained() {
    for (spec, needle) in [
        ("2x8", "three numbers"),
        ("0x8x2", "at least 1"),
        ("2x6x2:n4", "split evenly"),
        ("2x8x2:q", "unknown option"),
        ("1000x1000x1000", "more than"),
        ("65536x1x1", "NUMA nodes"),
    ] {
        let err = Topology::synthetic(spec).unwrap_err().to_string();
        assert!(err.contains(needle), "{spec}: {err}");
        assert!(
            err.contains("--help-synthetic"),
            "{spec}: error lacks the pointer to the grammar"
        );
        assert_eq!(err.lines().count(), 1, "{spec}: not one line");
    }
}

#[test]
fn check_cpus_names_offenders() {
    let t = Topology::synthetic("1x2x1").unwrap();
    let err = t
        .check_cpus(&CpuSet::parse_list("0-3").unwrap())
        .unwrap_err();
    assert!(err.contains("2-3"), "{err}");
    assert!(t.check_cpus(&CpuSet::parse_list("1").unwrap()).is_ok());
}
