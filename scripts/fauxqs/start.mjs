// Start fauxqs on 127.0.0.1 only (its CLI binds 0.0.0.0). Usage: node start.mjs PORT
import { startFauxqs } from "fauxqs";

const port = Number(process.argv[2] ?? 4567);
await startFauxqs({ port, host: "127.0.0.1", logger: false });
console.log(`fauxqs listening on http://127.0.0.1:${port}`);
