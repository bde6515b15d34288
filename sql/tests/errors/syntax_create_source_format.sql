-- CREATE SOURCE is parsed by Millpond: only FORMAT JSON.
CREATE SOURCE bids (auction INT, price INT)
    FROM TOPIC 'bids' FORMAT CSV;
