.venv/bin/sqsdelay emulator --port 4566 &                 # moto server on 127.0.0.1
export SQSDELAY_ENDPOINT_URL=http://127.0.0.1:4566
.venv/bin/sqsdelay install orders                         # orders, orders-delay.fifo, error
.venv/bin/sqsdelay send orders --delay 86400 --body '{"remind": "tomorrow"}'
.venv/bin/sqsdelay worker orders                          # the service that moves delays on
