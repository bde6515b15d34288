//! Properties of the generated Nexmark stream.

use std::collections::BTreeSet;

use millpond_nexmark::{AUCTION_ID_LEAD, Config, Event, FIRST_AUCTION_ID, FIRST_PERSON_ID, Generator, PERSON_ID_LEAD};

fn events(config: Config, count: u64) -> Vec<Event> {
    let generator = Generator::new(config);
    (0..count).map(|n| generator.event(n)).collect()
}

#[test]
fn proportions_are_one_three_forty_six() {
    let stream = events(Config::default(), 50_000);
    let count = |topic| stream.iter().filter(|e| e.topic() == topic).count();
    assert_eq!((count("person"), count("auction"), count("bid")), (1_000, 3_000, 46_000));
}

#[test]
fn the_seed_alone_determines_the_stream() {
    let a = events(Config { seed: 7, ..Config::default() }, 2_000);
    let b = events(Config { seed: 7, ..Config::default() }, 2_000);
    let c = events(Config { seed: 8, ..Config::default() }, 2_000);
    assert_eq!(a, b);
    assert_ne!(a, c);
    // Random access gives the same event as sequential generation.
    let generator = Generator::new(Config { seed: 7, ..Config::default() });
    assert_eq!(generator.event(1_234), a[1_234]);
}

#[test]
fn ids_are_dense_and_references_point_at_existing_or_nearly_existing_entities() {
    let stream = events(Config::default(), 100_000);
    let (mut next_person, mut next_auction) = (FIRST_PERSON_ID, FIRST_AUCTION_ID);
    let mut previous_time = i64::MIN;
    for event in &stream {
        assert!(event.date_time() >= previous_time, "event time never goes back");
        previous_time = event.date_time();
        match event {
            Event::Person(p) => {
                assert_eq!(p.id, next_person);
                next_person += 1;
            }
            Event::Auction(a) => {
                assert_eq!(a.id, next_auction);
                next_auction += 1;
                assert!(a.seller < next_person + PERSON_ID_LEAD, "seller {} of auction {}", a.seller, a.id);
                assert!(a.expires > a.date_time && a.reserve >= a.initial_bid);
                assert!((10..15).contains(&a.category));
            }
            Event::Bid(b) => {
                assert!(b.auction >= FIRST_AUCTION_ID && b.auction < next_auction + AUCTION_ID_LEAD, "{b:?}");
                assert!(b.bidder >= FIRST_PERSON_ID && b.bidder < next_person + PERSON_ID_LEAD, "{b:?}");
                assert!((100..=100_000_000).contains(&b.price), "price {}", b.price);
            }
        }
    }
}

#[test]
fn hot_auctions_and_bidders_get_about_their_share() {
    let stream = events(Config::default(), 100_000);
    let bids: Vec<_> = stream.iter().filter_map(|e| if let Event::Bid(b) = e { Some(b) } else { None }).collect();
    // hot_auction_ratio 2: about half the bids go to the head of the newest batch of 100 auctions.
    let hot =
        bids.iter().filter(|b| (b.auction - FIRST_AUCTION_ID).is_multiple_of(100)).count() as f64 / bids.len() as f64;
    assert!((0.45..0.6).contains(&hot), "hot auction share {hot}");
    // hot_bidders_ratio 4: about three quarters by the batch's second person.
    let hot = bids.iter().filter(|b| (b.bidder - FIRST_PERSON_ID) % 100 == 1).count() as f64 / bids.len() as f64;
    assert!((0.7..0.8).contains(&hot), "hot bidder share {hot}");
    let auctions: BTreeSet<u64> = bids.iter().map(|b| b.auction).collect();
    assert!(auctions.len() > 1_000, "cold bids spread over many auctions: {}", auctions.len());
}

#[test]
fn events_serialize_with_the_nexmark_field_names() {
    let stream = events(Config::default(), 50);
    for event in &stream {
        let json: serde_json::Value = serde_json::from_str(&event.to_json()).unwrap();
        let mut fields: Vec<&str> = json.as_object().unwrap().keys().map(String::as_str).collect();
        fields.sort_unstable();
        let expected: &[&str] = match event {
            Event::Person(_) => &["city", "credit_card", "date_time", "email_address", "extra", "id", "name", "state"],
            Event::Auction(_) => &[
                "category",
                "date_time",
                "description",
                "expires",
                "extra",
                "id",
                "initial_bid",
                "item_name",
                "reserve",
                "seller",
            ],
            Event::Bid(_) => &["auction", "bidder", "channel", "date_time", "extra", "price", "url"],
        };
        assert_eq!(fields, expected);
        assert_eq!(json.get("id").or(json.get("auction")).and_then(|v| v.as_u64()), Some(event.key()));
    }
}

#[test]
fn event_time_follows_the_rate() {
    let generator = Generator::new(Config { events_per_second: 1_000, ..Config::default() });
    assert_eq!(generator.timestamp_ms(0), Config::default().base_time_ms);
    assert_eq!(generator.timestamp_ms(1_000) - generator.timestamp_ms(0), 1_000);
    let sizes: Vec<usize> = (0..5_000).map(|n| generator.event(n).to_json().len()).collect();
    let average = sizes.iter().sum::<usize>() / sizes.len();
    assert!((150..350).contains(&average), "average event size {average} bytes");
}

#[test]
fn neighbouring_events_draw_independent_values() {
    // Regression: streams seeded `seed ^ n * step` were shifted copies of
    // their neighbours', so consecutive auctions shared item names.
    for seed in [0, 1, 8] {
        let stream = events(Config { seed, ..Config::default() }, 5_000);
        let names: Vec<&str> = stream
            .iter()
            .filter_map(|e| if let Event::Auction(a) = e { Some(a.item_name.as_str()) } else { None })
            .collect();
        for pair in names.windows(2) {
            assert_ne!(pair[0], pair[1], "seed {seed}");
            assert_ne!(&pair[0][1..], &pair[1][..19], "seed {seed}: shifted copy");
            assert_ne!(&pair[0][2..], &pair[1][..18], "seed {seed}: shifted copy");
        }
        let distinct: std::collections::BTreeSet<_> = names.iter().collect();
        assert_eq!(distinct.len(), names.len(), "seed {seed}: item names repeat");
    }
}
