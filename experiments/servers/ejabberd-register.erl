%% The accounts of one run of experiments/ejabberd.yaml: user1..user{accounts} with the
%% passwords pass1..pass{accounts} on localhost, registered inside a node that has just booted
%% ejabberd on the run's fresh spool (servers/ejabberd-node.sh register passes this file to
%% `erl -eval`), 1,000 per process in parallel. Then the node stops cleanly and exits 0; any
%% failure (other than an account that exists) prints the first ones and exits 1.
try
    Host = <<"localhost">>,
    Last = {accounts},
    T0 = erlang:monotonic_time(millisecond),
    Reg = fun(From, To) ->
        [begin
             N = integer_to_binary(I),
             case ejabberd_auth:try_register(<<"user", N/binary>>, Host, <<"pass", N/binary>>) of
                 ok -> ok;
                 {error, exists} -> ok;
                 Other -> {I, Other}
             end
         end || I <- lists:seq(From, To)]
    end,
    Parent = self(),
    Pids = [spawn_link(fun() -> Parent ! {self(), Reg(A, min(A + 999, Last))} end)
            || A <- lists:seq(1, Last, 1000)],
    Errors = lists:append([receive {P, R} -> [E || E <- R, E =/= ok] end || P <- Pids]),
    Ms = erlang:monotonic_time(millisecond) - T0,
    case Errors of
        [] ->
            io:format("registered user1..user~b in ~b ms~n", [Last, Ms]),
            init:stop(0);
        _ ->
            io:format("~b registrations failed, e.g. ~p~n", [length(Errors), lists:sublist(Errors, 3)]),
            erlang:halt(1)
    end
catch
    Class:Reason:Stack ->
        io:format("registering failed: ~p:~p ~p~n", [Class, Reason, Stack]),
        erlang:halt(1)
end.
