// @ts-check
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

export default defineConfig(
  { ignores: ["dist/", "node_modules/", "test/control-plane/"] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ["eslint.config.js"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/restrict-template-expressions": ["error", { allowNumber: true }],
      // client-node's models are classes with only public fields; object literals are its idiom.
      "@typescript-eslint/no-unsafe-class-instance-assignment": "off",
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            {
              from: "package",
              package: "node:test",
              name: ["test", "describe", "it", "suite", "before", "after"],
            },
          ],
        },
      ],
    },
  },
  {
    files: ["test/**/*.ts", "bench/**/*.ts"],
    rules: {
      "@typescript-eslint/no-non-null-assertion": "off",
      // assert.* narrows types, which makes later optional chains in tests look "unnecessary".
      "@typescript-eslint/no-unnecessary-condition": "off",
      // Tests build API objects as plain literals typed with client-node's classes; copying one with a
      // spread is exactly what they mean.
      "@typescript-eslint/no-misused-spread": "off",
    },
  },
);
