# Runs `npm ci` in admin_ui/ only when package-lock.json differs from the one
# node_modules was installed from (its hash is kept in
# node_modules/.primcache-lock-sha256), so several build directories share one
# install and an unchanged lock file installs nothing.
#   cmake -DNPM=... -DUI_DIR=... -DSTAMP=... -P npm-ci.cmake
file(SHA256 "${UI_DIR}/package-lock.json" lock_hash)
set(marker "${UI_DIR}/node_modules/.primcache-lock-sha256")
set(installed "")
if(EXISTS "${marker}")
  file(READ "${marker}" installed)
endif()
if(NOT installed STREQUAL lock_hash)
  message(STATUS "admin_ui: npm ci (package-lock.json changed)")
  execute_process(
    COMMAND "${NPM}" ci --no-audit --no-fund --loglevel=error
    WORKING_DIRECTORY "${UI_DIR}"
    RESULT_VARIABLE result
    OUTPUT_VARIABLE ci_output
    ERROR_VARIABLE ci_output)
  if(NOT result EQUAL 0)
    # `npm ci` also refuses a lock file that lacks the other platforms'
    # optional native packages (rollup's, esbuild's), which is what a registry
    # mirror serving only this platform's produces. `npm install --no-save`
    # still installs the locked versions and writes neither package.json nor
    # package-lock.json.
    message(STATUS "admin_ui: `npm ci` refused the lock file; installing the locked versions "
                   "with `npm install --no-save`")
    execute_process(
      COMMAND "${NPM}" install --no-save --no-audit --no-fund --loglevel=error
      WORKING_DIRECTORY "${UI_DIR}"
      RESULT_VARIABLE result)
  endif()
  if(NOT result EQUAL 0)
    message(STATUS "${ci_output}")
    message(FATAL_ERROR "admin_ui: `npm ci` failed (${result}); the console needs the npm registry "
                        "or a filled npm cache the first time")
  endif()
  file(WRITE "${marker}" "${lock_hash}")
endif()
file(TOUCH "${STAMP}")
