// Vite configuration for the primcache console.
//
// `npm run build` writes dist/ (or --outDir), which the CMake build embeds in
// the admin server. `npm run dev` serves the page with hot reload and proxies
// the API to a running primcached: PRIMCACHE_ADMIN=http://127.0.0.1:PORT.
import { defineConfig } from "vite";

const admin = process.env.PRIMCACHE_ADMIN ?? "http://127.0.0.1:8089";

export default defineConfig({
  base: "/",
  build: {
    assetsDir: "assets",
    // Everything is served from memory; keep the file set small and stable.
    assetsInlineLimit: 0,
    sourcemap: false,
    target: "es2020",
    reportCompressedSize: false,
  },
  server: {
    proxy: {
      "/api": admin,
      "/healthz": admin,
      "/metrics": admin,
    },
  },
});
