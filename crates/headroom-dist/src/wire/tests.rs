use super::*;
use hdrhistogram::serialization::V2DeflateSerializer;
use headroom_metrics::new_histogram;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// A recorder with every field set to something random.
fn random_recorder(rng: &mut SmallRng) -> Recorder {
    let mut r = Recorder::new();
    let names = rng.gen_range(0..5);
    let matches = rng.gen_range(0..4);
    r.ensure_names(names, matches);
    for _ in 0..rng.gen_range(0..2_000) {
        let v = rng.gen_range(1..5_000_000u64);
        r.record_latency(v, v / 2 + 1);
        r.record_connect(rng.gen_range(1..10_000));
        if rng.gen_bool(0.3) {
            r.record_tls(rng.gen_range(1..50_000));
        }
        if rng.gen_bool(0.2) {
            r.record_served(rng.gen_range(1..2_000_000));
        }
        if rng.gen_bool(0.2) {
            // Zero included: a timer fired within its slack was not late.
            r.record_lag(rng.gen_range(0..100_000));
        }
        headroom_metrics::record(&mut r.sessions, rng.gen_range(1..MAX_LATENCY_US * 2));
        if names > 0 {
            r.record_name(rng.gen_range(0..names), v, rng.gen_bool(0.1));
        }
    }
    for m in &mut r.matches {
        *m = rng.gen();
    }
    let c = &mut r.counters;
    c.requests = rng.gen();
    c.responses = rng.gen();
    c.errors.iter_mut().for_each(|e| *e = rng.gen());
    c.status.iter_mut().for_each(|e| *e = rng.gen());
    c.status_codes.iter_mut().for_each(|e| *e = rng.gen());
    c.bytes_sent = rng.gen();
    c.bytes_received = rng.gen();
    c.users_started = rng.gen();
    c.users_finished = rng.gen();
    c.connects = rng.gen();
    c.disconnects = rng.gen();
    c.connections_open = rng.gen();
    c.connections_peak = rng.gen();
    c.tcp_connected_open = rng.gen();
    c.tcp_connected_peak = rng.gen();
    c.idle_closed = rng.gen();
    c.reconnects = rng.gen();
    c.users_active = rng.gen();
    c.sessions_completed = rng.gen();
    c.sessions_aborted = rng.gen();
    c.users_dropped = rng.gen();
    c.proto.iter_mut().for_each(|e| *e = rng.gen());
    c.worker_cpu_us = rng.gen();
    c.worker_wait_us = rng.gen();
    c.worker_late_intervals = rng.gen();
    c.worker_intervals = rng.gen();
    c.worker_busy_intervals = rng.gen();
    for _ in 0..rng.gen_range(0..20) {
        let mut k = Negotiated {
            version: rng.gen_range(0x0303..=0x0304),
            suite: rng.gen_range(0x1301..=0x1303),
            group: rng.gen_range(0..3),
            http: rng.gen_range(0..2) * 20,
            ..Negotiated::default()
        };
        k.set_alpn(rng.gen_bool(0.5).then_some(&b"h2"[..]));
        r.negotiated.count(&k, rng.gen_range(1..1_000));
    }
    r
}

/// The same counts, count, min and max (a recorder's histograms are sized by their values, a
/// decoded one has the standard range: `==` would compare their lengths too).
fn assert_same_histogram(a: &Histogram<u64>, b: &Histogram<u64>) {
    assert_eq!(a.len(), b.len());
    assert_eq!(a.min_nz(), b.min_nz());
    assert_eq!(a.max(), b.max());
    let counts = |h: &Histogram<u64>| {
        h.iter_recorded()
            .map(|v| (v.value_iterated_to(), v.count_at_value()))
            .collect::<Vec<_>>()
    };
    assert_eq!(counts(a), counts(b));
}

/// `a` went over the wire and came back as `b`.
fn assert_same(a: &Recorder, b: &Recorder) {
    for (x, y) in [
        (&a.latency, &b.latency),
        (&a.latency_uncorrected, &b.latency_uncorrected),
        (&a.connect, &b.connect),
        (&a.tls, &b.tls),
        (&a.sessions, &b.sessions),
        (&a.served, &b.served),
        (&a.lag, &b.lag),
    ] {
        assert_same_histogram(x, y);
        assert_eq!(y.low(), 1);
        assert_eq!(y.high(), MAX_LATENCY_US);
    }
    assert_eq!(a.counters, b.counters);
    assert_eq!(a.negotiated, b.negotiated);
    assert_eq!(a.names.len(), b.names.len());
    for (x, y) in a.names.iter().zip(&b.names) {
        assert_eq!(x.count, y.count);
        assert_eq!(x.errors, y.errors);
        assert_same_histogram(&x.latency, &y.latency);
    }
    assert_eq!(a.matches, b.matches);
}

#[test]
fn round_trip_random_recorders() {
    let mut rng = SmallRng::seed_from_u64(7);
    for _ in 0..50 {
        let r = random_recorder(&mut rng);
        let m = encode_recorder(&r);
        // Through protobuf bytes too, as on the wire.
        let bytes = prost::Message::encode_to_vec(&m);
        let m2: RecorderMsg = prost::Message::decode(bytes.as_slice()).unwrap();
        assert_eq!(m, m2);
        assert_same(&r, &decode_recorder(&m2).unwrap());
    }
    let empty = Recorder::new();
    assert_same(&empty, &decode_recorder(&encode_recorder(&empty)).unwrap());
}

/// Exact status codes survive the wire and merge exactly, and cost little on it: the 500 slots
/// of an interval that saw a few codes take about a byte each.
#[test]
fn status_codes_over_the_wire_merge_exactly() {
    use headroom_core::StatusSet;
    let expect: StatusSet = "200,204".parse().unwrap();
    let mut parts = [Recorder::new(), Recorder::new(), Recorder::new()];
    let codes = [200u16, 204, 301, 401, 404, 429, 503, 599, 100, 999];
    for i in 0..10_000usize {
        let c = &mut parts[i % 3].counters;
        c.responses += 1;
        c.reply_status(codes[i * 7 % codes.len()], &expect);
    }
    let mut direct = Recorder::new();
    let mut wired = Recorder::new();
    for p in &parts {
        direct.add(p);
        let bytes = prost::Message::encode_to_vec(&encode_recorder(p));
        let m: RecorderMsg = prost::Message::decode(bytes.as_slice()).unwrap();
        wired.add(&decode_recorder(&m).unwrap());
    }
    assert_eq!(wired.counters, direct.counters);
    let seen: Vec<(u16, u64)> = wired.counters.codes_seen().collect();
    assert_eq!(seen.len(), 9, "999 is in the `other` class only: {seen:?}");
    assert_eq!(seen.iter().map(|s| s.1).sum::<u64>(), 9_000);
    assert_eq!(
        wired.counters.errors[ErrorKind::UnexpectedStatus.index()],
        8_000
    );
    let msg = encode_recorder(&parts[0]).counters.unwrap();
    let codes_bytes = prost::Message::encoded_len(&CountersMsg {
        status_codes: msg.status_codes.clone(),
        ..Default::default()
    });
    assert!(codes_bytes < STATUS_CODES + 64, "{codes_bytes} bytes");
}

/// One sample of distribution `kind`, in microseconds.
fn sample(rng: &mut SmallRng, kind: usize) -> u64 {
    match kind {
        // Uniform, sub-millisecond to 50 ms.
        0 => rng.gen_range(100..50_000),
        // Exponential around 2 ms.
        1 => (-(1.0 - rng.gen::<f64>()).ln() * 2_000.0) as u64 + 1,
        // Bimodal: a fast path and a slow one.
        2 => {
            if rng.gen_bool(0.95) {
                rng.gen_range(200..400)
            } else {
                rng.gen_range(80_000..120_000)
            }
        }
        // Heavy tail: Pareto (alpha 1.1) with stalls of one to ten minutes.
        _ if rng.gen_bool(0.002) => rng.gen_range(60_000_000..600_000_000),
        _ => {
            let u: f64 = 1.0 - rng.gen::<f64>();
            ((500.0 / u.powf(1.0 / 1.1)) as u64).min(600_000_000)
        }
    }
}

/// Acceptance: merged percentiles equal those of one histogram holding all samples, after each
/// part went over the wire.
#[test]
fn merged_after_wire_equals_one_histogram() {
    let mut rng = SmallRng::seed_from_u64(42);
    for k in [2usize, 3, 7] {
        let mut all = new_histogram();
        let mut parts: Vec<Recorder> = (0..k).map(|_| Recorder::new()).collect();
        for i in 0..200_000usize {
            let v = sample(&mut rng, i % 4);
            headroom_metrics::record(&mut all, v.max(1));
            // Uneven split.
            let p = (rng.gen_range(0..k * k)).min(k * k - 1) % k;
            parts[p].record_latency(v, v);
        }
        let mut merged = Recorder::new();
        for p in &parts {
            let back = decode_recorder(&encode_recorder(p)).unwrap();
            merged.add(&back);
        }
        let m = &merged.latency;
        assert_eq!(m.len(), all.len(), "count, k={k}");
        assert_eq!(m.min(), all.min(), "min, k={k}");
        assert_eq!(m.max(), all.max(), "max, k={k}");
        assert_eq!(m.mean(), all.mean(), "mean, k={k}");
        for q in [0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
            assert_eq!(
                m.value_at_quantile(q),
                all.value_at_quantile(q),
                "q={q}, k={k}"
            );
        }
        assert!(all.max() > 60_000_000, "the heavy tail reaches minutes");
        assert_eq!(*m, all);
    }
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let mut rng = SmallRng::seed_from_u64(3);
    let good = encode_recorder(&random_recorder(&mut rng));

    let mut m = good.clone();
    m.counters.as_mut().unwrap().errors.pop();
    assert!(matches!(
        decode_recorder(&m),
        Err(WireError::ArrayLength {
            field: "errors",
            ..
        })
    ));
    let mut m = good.clone();
    m.counters.as_mut().unwrap().status.push(1);
    assert!(decode_recorder(&m).is_err());
    let mut m = good.clone();
    m.counters.as_mut().unwrap().proto.clear();
    assert!(decode_recorder(&m).is_err());
    // An agent that does not send exact codes (an older version) is named, not misread.
    let mut m = good.clone();
    m.counters.as_mut().unwrap().status_codes.clear();
    assert_eq!(
        decode_recorder(&m).unwrap_err(),
        WireError::ArrayLength {
            field: "status_codes",
            got: 0,
            expected: STATUS_CODES,
        }
    );
    let mut m = good.clone();
    m.counters = None;
    assert_eq!(decode_recorder(&m).unwrap_err(), WireError::MissingCounters);

    // Truncated, extended, empty, foreign bounds.
    for bad in [
        good.latency[..good.latency.len() - 1].to_vec(),
        [good.latency.clone(), vec![0]].concat(),
        Vec::new(),
        vec![0; 39],
    ] {
        let mut m = good.clone();
        m.latency = bad;
        assert!(decode_recorder(&m).is_err());
    }
    let mut other = Histogram::<u64>::new_with_bounds(1, 1000, 2).unwrap();
    other.record(5).unwrap();
    let mut m = good.clone();
    // Encoded as it is (the encoder would give it the standard bounds).
    m.connect.clear();
    V2Serializer::new()
        .serialize(&other, &mut m.connect)
        .unwrap();
    let e = decode_recorder(&m).unwrap_err().to_string();
    assert!(e.contains("connect") && e.contains("bounds"), "{e}");

    // Random corruption of the payload and of the header: errors or (for harmless flips)
    // valid histograms, never a panic. Silence the panic hook for the contained ones.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    for i in 0..2_000 {
        let mut m = good.clone();
        let h = &mut m.latency;
        let n = rng.gen_range(1..4);
        for _ in 0..n {
            let at = rng.gen_range(0..h.len());
            h[at] = rng.gen();
        }
        if i % 3 == 0 {
            // Payload of adversarial varints.
            for b in h.iter_mut().skip(V2_HEADER) {
                *b = 0xff;
            }
        }
        let _ = decode_recorder(&m);
    }
    std::panic::set_hook(hook);
}

/// Informational: size and time of plain V2 against V2 deflate for a busy interval histogram.
#[test]
fn v2_plain_vs_deflate_size_and_time() {
    let mut rng = SmallRng::seed_from_u64(9);
    let mut h = new_histogram();
    for i in 0..100_000 {
        headroom_metrics::record(&mut h, sample(&mut rng, i % 4).max(1));
    }
    let mut plain = Vec::new();
    let t = std::time::Instant::now();
    for _ in 0..20 {
        plain.clear();
        V2Serializer::new().serialize(&h, &mut plain).unwrap();
    }
    let tp = t.elapsed() / 20;
    let mut deflated = Vec::new();
    let t = std::time::Instant::now();
    for _ in 0..20 {
        deflated.clear();
        V2DeflateSerializer::new()
            .serialize(&h, &mut deflated)
            .unwrap();
    }
    let td = t.elapsed() / 20;
    eprintln!(
        "V2: {} bytes in {tp:?}; V2 deflate: {} bytes in {td:?}",
        plain.len(),
        deflated.len()
    );
    assert!(plain.len() < 64 * 1024);
}

#[test]
fn negotiated_round_trips_and_hostile_values_are_errors() {
    let mut r = Recorder::new();
    let mut k = Negotiated {
        version: 0x0304,
        suite: 0x1302,
        group: 0x001d,
        http: 20,
        ..Negotiated::default()
    };
    k.set_alpn(Some(b"h2"));
    r.negotiated.count(&k, 1_234);
    r.negotiated.other = 5;
    let m = encode_recorder(&r);
    assert_eq!(decode_recorder(&m).unwrap().negotiated, r.negotiated);

    let mut bad = m.clone();
    bad.negotiated[0].suite = 0x1_0000;
    assert!(matches!(
        decode_recorder(&bad),
        Err(WireError::Negotiated(_))
    ));
    let mut bad = m.clone();
    bad.negotiated[0].alpn = vec![b'x'; 1 << 20];
    assert!(matches!(
        decode_recorder(&bad),
        Err(WireError::Negotiated(_))
    ));
    let mut bad = m.clone();
    bad.negotiated = vec![bad.negotiated[0].clone(); NEGOTIATED_MAX + 1];
    assert!(matches!(
        decode_recorder(&bad),
        Err(WireError::Negotiated(_))
    ));
    let mut bad = m;
    bad.negotiated[0].http = 300;
    assert!(decode_recorder(&bad).is_err());
}
